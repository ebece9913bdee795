// Entries made ahead of a read, held until the read takes them: a prefetched sample the placement
// does not cache would otherwise be fetched twice, and a variant rendered ahead is kept nowhere
// else. Bounded in bytes. Two kinds of work stage entries, and each counts its own used and
// wasted ones:
// - the prefetcher (published orders; also the header prober's first chunks): when full, the
//   oldest entries go first (each one wasted work);
// - render ahead (no order published): only into room that is free, never evicting anything, and
//   at most `ahead_share` of the capacity, so prefetches and probes always find room. A render
//   ahead is speculative: once its room is full it waits for opens to take entries.
// Staged samples count as resident: a read of them does not go to the source.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/key.h"
#include "prepfs/cache/sample_residency.h"
#include "prepfs/common/stats.h"

namespace prepfs {

enum class StagedBy : uint8_t { prefetch, render_ahead };
// Who takes a staged entry: a read (counted as the prefetch's hit or the render ahead's use), or
// work ahead using it as an input (the raw JPEG of a variant it renders): not counted, since the
// entry it makes is, when a read takes that.
enum class TakenBy : uint8_t { read, work_ahead };

class Staging {
 public:
  Staging(uint64_t capacity, SampleResidency& residency, PrefetchCounters& prefetch, RenderAheadCounters& ahead,
          double ahead_share = 0.5)
      : capacity_(capacity),
        ahead_capacity_(uint64_t(double(capacity) * ahead_share)),
        residency_(residency),
        prefetch_(prefetch),
        ahead_(ahead) {}

  // Keeps chunk for key (an entry of sample) until taken, evicting the oldest entries if needed;
  // false when it cannot fit at all.
  bool put(const CacheKey& key, ChunkRef chunk, uint32_t sample);
  // A variant rendered ahead: kept only if it fits in free room within the render-ahead share.
  bool put_ahead(const CacheKey& key, ChunkRef chunk, uint32_t sample);
  // Whether put_ahead of that many bytes would succeed now (checked before rendering).
  bool has_room_ahead(uint64_t bytes) const;
  // The entry, removed (null when not staged). A read's take counts a prefetch hit or a render
  // ahead used.
  ChunkRef take(const CacheKey& key, TakenBy by = TakenBy::read);
  // The entry, left staged and uncounted (null when not staged): for work that may not use it
  // (work ahead that gives way), or whose read is still to come (a header probe).
  ChunkRef peek(const CacheKey& key) const;
  // Drops an entry nobody will take (a variant whose open passed): wasted.
  void drop(const CacheKey& key);
  bool contains(const CacheKey& key) const;
  void clear();  // every entry counts as wasted
  // Drops every entry of a sample whose file changed (wasted): never served (their keys name the
  // old version), but they held room and showed the sample as resident.
  void drop_sample(uint32_t sample);
  uint64_t bytes() const;
  uint64_t ahead_bytes() const;
  uint64_t capacity() const { return capacity_; }

 private:
  struct Entry {
    ChunkRef chunk;
    uint32_t sample;
    StagedBy by;
    std::list<CacheKey>::iterator age;
  };
  using Entries = std::unordered_map<CacheKey, Entry, CacheKeyHash>;
  void drop_locked(Entries::iterator it);
  void count_wasted(StagedBy by);
  bool fits_ahead_locked(uint64_t bytes) const;

  const uint64_t capacity_;
  const uint64_t ahead_capacity_;
  SampleResidency& residency_;
  PrefetchCounters& prefetch_;
  RenderAheadCounters& ahead_;
  mutable std::mutex mu_;
  Entries entries_;
  std::list<CacheKey> oldest_first_;
  uint64_t bytes_ = 0;
  uint64_t ahead_bytes_ = 0;  // of entries staged by render ahead
};

}  // namespace prepfs

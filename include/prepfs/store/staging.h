// Entries fetched or rendered ahead of a read (the prefetcher's), held until the read takes them:
// a prefetched sample the placement does not cache would otherwise be fetched twice. Bounded in
// bytes; the oldest entries go first when full (each one wasted prefetch work). Staged samples
// count as resident: a read of them does not go to the source.
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

class Staging {
 public:
  Staging(uint64_t capacity, SampleResidency& residency, PrefetchCounters& counters)
      : capacity_(capacity), residency_(residency), counters_(counters) {}

  // Keeps chunk for key (an entry of sample) until taken; false when it cannot fit at all.
  bool put(const CacheKey& key, ChunkRef chunk, uint32_t sample);
  ChunkRef take(const CacheKey& key);  // null when not staged
  bool contains(const CacheKey& key) const;
  void clear();  // every entry counts as wasted
  uint64_t bytes() const;
  uint64_t capacity() const { return capacity_; }

 private:
  struct Entry {
    ChunkRef chunk;
    uint32_t sample;
    std::list<CacheKey>::iterator age;
  };
  void drop_locked(std::unordered_map<CacheKey, Entry, CacheKeyHash>::iterator it);

  const uint64_t capacity_;
  SampleResidency& residency_;
  PrefetchCounters& counters_;
  mutable std::mutex mu_;
  std::unordered_map<CacheKey, Entry, CacheKeyHash> entries_;
  std::list<CacheKey> oldest_first_;
  uint64_t bytes_ = 0;
};

}  // namespace prepfs

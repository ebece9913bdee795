// What the cache may know about samples beyond its own accesses: when each will next be read (a
// published access order) and how important it is (per-sample loss). Layers above fill it (the
// partition's JobKnowledge); the Belady and importance policies read it under a tier lock, so
// implementations are thread-safe and cheap per call.
#pragma once

#include <cstdint>
#include <limits>

namespace prepfs {

// The owner of a cache entry: the index node of the sample it belongs to.
inline constexpr uint32_t kNoSample = std::numeric_limits<uint32_t>::max();

class SampleKnowledge {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  virtual ~SampleKnowledge() = default;
  // When the sample will next be read, on one timeline for all jobs (smaller is sooner); kNever
  // when no published order names it again.
  virtual uint64_t next_use(uint32_t sample) const = 0;
  // Higher keeps it cached longer; samples never reported rank as important (unseen first).
  virtual double importance(uint32_t sample) const = 0;
  // Some job has published accesses it has not read yet.
  virtual bool has_future() const = 0;
  // Changes whenever next uses or importances changed wholesale (an order published, an
  // importance file written): policies then re-rank every entry.
  virtual uint64_t generation() const = 0;
};

}  // namespace prepfs

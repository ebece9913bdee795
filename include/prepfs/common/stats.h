// Counters shared by the layers. Plain relaxed atomics: they are observability, not control.
#pragma once

#include <atomic>
#include <cstdint>

namespace prepfs {

struct TierCounters {
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
  std::atomic<uint64_t> hit_bytes{0};
  std::atomic<uint64_t> inserts{0};
  std::atomic<uint64_t> evictions{0};
  std::atomic<uint64_t> rejected{0};      // admissions refused (budget, no-eviction policy, errors)
  std::atomic<uint64_t> corrupt{0};       // entries that failed their checksum (SSD only)
  std::atomic<uint64_t> write_errors{0};  // failed writes (SSD full, I/O error)
};

struct SourceCounters {
  std::atomic<uint64_t> reads{0};         // read requests sent to the source
  std::atomic<uint64_t> bytes{0};         // bytes fetched from the source
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> opens{0};
  std::atomic<uint64_t> read_ns{0};       // total time spent in source reads
};

inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
inline uint64_t load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

}  // namespace prepfs

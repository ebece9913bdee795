// Counters shared by the layers. Plain relaxed atomics: they are observability, not control.
#pragma once

#include <atomic>
#include <chrono>
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
  // Device time of the SSD tier (zero for RAM), for the profiler's SSD bandwidths: bytes of
  // successful entry reads and writes, and the wall time of each from open to the last byte
  // (the write to its rename), summed over every thread.
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> read_ns{0};
  std::atomic<uint64_t> write_bytes{0};
  std::atomic<uint64_t> write_ns{0};
};

// A fixed-bucket latency histogram: one relaxed atomic per bucket, so recording from many
// threads never takes a lock. Bucket i counts observations <= kBoundsNs[i]; the last is +Inf.
struct LatencyHistogram {
  static constexpr int kBuckets = 16;
  static constexpr uint64_t kBoundsNs[kBuckets - 1] = {
      50'000,     100'000,    250'000,     500'000,     1'000'000,   2'500'000,     5'000'000,    10'000'000,
      25'000'000, 50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000};
  std::atomic<uint64_t> buckets[kBuckets]{};
  std::atomic<uint64_t> sum_ns{0};

  void record(uint64_t ns) {
    int i = 0;
    while (i < kBuckets - 1 && ns > kBoundsNs[i]) i++;
    buckets[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(ns, std::memory_order_relaxed);
  }
};

struct SourceCounters {
  std::atomic<uint64_t> reads{0};  // read requests sent to the source
  std::atomic<uint64_t> bytes{0};  // bytes fetched from the source
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> opens{0};
  std::atomic<uint64_t> changed{0};  // reads that found their file changed or gone since it was indexed
  std::atomic<uint64_t> read_ns{0};  // total time spent in source reads
  LatencyHistogram read_latency;     // per successful read
  // Time with at least one read in flight (see SourceBusy, busy_ns_now): bytes over busy time is
  // the profiler's tightest lower bound of the source's bandwidth.
  std::atomic<int64_t> in_flight{0};
  std::atomic<uint64_t> busy_since_ns{0};
  std::atomic<uint64_t> busy_ns{0};  // closed busy periods only
};

// The FUSE adaptor's read replies (fuse_reply_iov: the kernel copies the bytes into the reader's
// buffer during the call), filled by the sessions of the data views for the profiler's copy
// bandwidth. Here rather than in fuse/ so the core reads it without knowing FUSE.
struct ReplyCounters {
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> ns{0};  // wall time inside the reply calls, summed over threads
};

// The transforms of the sample store (decode, augment), for stats and the profiler's CPU costs.
struct RenderCounters {
  std::atomic<uint64_t> decoded{0};       // decoded files rendered
  std::atomic<uint64_t> augmented{0};     // augmented variants rendered
  std::atomic<uint64_t> from_decoded{0};  // variants rendered from cached decoded pixels
  std::atomic<uint64_t> stopped_below_crop{0};  // variants from a JPEG known to decode: read down to the crop only
  std::atomic<uint64_t> errors{0};        // files that could not be rendered (EIO)
  std::atomic<uint64_t> cpu_ns{0};        // thread CPU time spent in transforms
  // The same split by kind, for the partition model's per-sample costs.
  std::atomic<uint64_t> decode_cpu_ns{0};   // decoded/ renders (decode + encode)
  std::atomic<uint64_t> augment_cpu_ns{0};  // augmented renders from JPEG bytes
  std::atomic<uint64_t> augment_from_decoded_cpu_ns{0};
  std::atomic<uint64_t> waits{0};         // renders that waited for a cpu slot
  std::atomic<uint64_t> memory_waits{0};  // renders that waited for transform memory
  std::atomic<uint64_t> timeouts{0};      // renders that gave up waiting (ETIMEDOUT)
  // The readers' stall that more transform workers would remove: wall time renders waited for a
  // cpu slot, summed over renders; and the wall time slots were busy (cpu=auto's inputs).
  std::atomic<uint64_t> cpu_wait_ns{0};
  std::atomic<uint64_t> slot_busy_ns{0};
  std::atomic<uint64_t> cpu_slots{0};  // transform slots now (a gauge: cpu=auto moves it)
};

// Variants rendered ahead of their open when no order is published (store/render_ahead.h): after
// a serve, the variant the file's next open will get, in a cpu slot nobody waits for. Every
// variant rendered ahead ends up used, late, wasted, or still staged.
struct RenderAheadCounters {
  std::atomic<uint64_t> rendered{0};  // variants rendered ahead
  std::atomic<uint64_t> used{0};      // ... that an open took from the staging
  std::atomic<uint64_t> late{0};      // ... whose open came during the render (it joined the render)
  std::atomic<uint64_t> wasted{0};    // ... dropped unread: no room, evicted by prefetches or evict, passed by opens
  std::atomic<uint64_t> skipped{0};  // serves not followed by one: slots busy or awaited, inputs not in memory, no room
  std::atomic<uint64_t> bytes{0};    // bytes rendered ahead
};

// What the views answered, and the request mix per view (the profiler's "which view is read").
struct ViewCounters {
  std::atomic<uint64_t> reads{0};  // read requests of raw/ and decoded/
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> read_errors{0};
  std::atomic<uint64_t> revalidations{0};
  std::atomic<uint64_t> changed_files{0};
  // Samples requested per view: reads at offset 0 of an image file (raw/, decoded/; raw/ counts
  // only what reaches the daemon: a read the page cache answers is not seen), and opens of
  // augmented/ files.
  std::atomic<uint64_t> raw_samples{0};
  std::atomic<uint64_t> decoded_samples{0};
  std::atomic<uint64_t> augmented_opens{0};
  // augmented/ opens that read through the kernel's page cache, and those of them that had the
  // kernel drop the file's older pages (core/variant_pages.h).
  std::atomic<uint64_t> augmented_reads{0};  // read requests that reached augmented/
  std::atomic<uint64_t> augmented_read_bytes{0};
  std::atomic<uint64_t> augmented_page_cache_opens{0};
  std::atomic<uint64_t> augmented_page_invalidations{0};
  // augmented/ opens past the bytes open handles may hold: their reads render the variant again.
  std::atomic<uint64_t> augmented_unheld_opens{0};
};

// Prefetching from published orders (store/prefetcher.h).
struct PrefetchCounters {
  std::atomic<uint64_t> prefetched{0};        // samples fetched or rendered ahead of their read
  // Reads that took a staged prefetch, or that the SSD served while a staged copy waited for its
  // queued write to land. What RAM keeps is not staged: a read of it counts as a RAM hit, not here
  // (and its waste is RAM's eviction).
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> late{0};              // reads that waited for a prefetch still in flight
  std::atomic<uint64_t> wasted{0};            // prefetched entries dropped before any read took them
  std::atomic<uint64_t> bytes{0};             // bytes prefetched
  std::atomic<uint64_t> max_in_flight{0};     // the most prefetches at once seen (bounded by config)
  std::atomic<uint64_t> max_window_bytes{0};  // the most bytes staged + in flight seen
  // Variants rendered ahead wait for a cpu slot nobody else waits for: how often, how long.
  std::atomic<uint64_t> slot_waits{0};
  std::atomic<uint64_t> slot_wait_ns{0};
  std::atomic<uint64_t> refetched{0};  // a variant's inputs dropped (a re-plan, an eviction) before its render
};

inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
inline uint64_t load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// Monotonic nanoseconds, for timing an operation into the counters above.
inline uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Marks one source read in flight for its lifetime (a scope around the read).
class SourceBusy {
 public:
  explicit SourceBusy(SourceCounters& c) : c_(c) {
    if (c_.in_flight.fetch_add(1, std::memory_order_acq_rel) == 0) c_.busy_since_ns.store(steady_ns());
  }
  ~SourceBusy() {
    if (c_.in_flight.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      const uint64_t now = steady_ns(), since = c_.busy_since_ns.load();
      if (now > since) bump(c_.busy_ns, now - since);  // a racing new period may have restarted it
    }
  }
  SourceBusy(const SourceBusy&) = delete;
  SourceBusy& operator=(const SourceBusy&) = delete;

 private:
  SourceCounters& c_;
};

// Busy time so far, including the period still open (a source that never goes idle has none
// closed).
inline uint64_t busy_ns_now(const SourceCounters& c) {
  uint64_t busy = load(c.busy_ns);
  if (c.in_flight.load(std::memory_order_acquire) > 0) {
    const uint64_t now = steady_ns(), since = c.busy_since_ns.load();
    if (now > since) busy += now - since;
  }
  return busy;
}

}  // namespace prepfs

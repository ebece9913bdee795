// The tier every node shares, between the node-local tiers and the source (docs/SCALING.md):
// entries in memcached under their content keys, in the layout of shared_value.h.
//
// The miss path (get_or_fill), per key, across nodes:
//   1. Look the entry up, and its lease, in one round trip. Found and valid: a hit.
//   2. Absent and no lease: take the lease (memcached `add` of the lease key, expiring after
//      lease_ttl). Taken: fill (fetch or render), publish the entry, drop the lease. So one node
//      in the cluster fetches a sample from the source, and the others read what it published.
//   3. Absent and leased by another node: wait, polling (2 ms doubling to 50 ms), until the entry
//      appears (a hit), or the lease goes without it (take it: back to 2), or lease_ttl has passed
//      since the wait began (the holder died or is slow: fill here, and publish).
// Publishing (step 2's "publish the entry, drop the lease") runs on a thread of its own, after
// the reader has its bytes: a slow memcached must not slow a read down. The queue is bounded in
// bytes (publish_queue_bytes); an entry that does not fit is not published (counted as dropped),
// and its lease is given back at once, so that the other nodes fill it themselves rather than
// wait out the lease. The lease is held until the entry is stored, so the other nodes wait for
// it, as they would for a fill; but not for long: an entry whose lease was taken more than half
// the lease TTL ago when its turn comes (servers slower than this node fills) is dropped the same
// way. Lease returns run on the publishing thread too. A re-read on this node of an entry still
// queued (gone from RAM meanwhile) is served from the queue rather than wait on its own lease.
// Any call that fails (a dead, slow or unreachable server) leaves the shared tier out of this
// read: the fill runs here and the reader gets its bytes; a corrupt or foreign value is a miss
// (and is replaced). The shared tier never turns into an error for a reader or into wrong bytes.
// Within one node, TierManager's in-flight table already joins concurrent readers of a key, so
// only one thread per node takes this path per key.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/key.h"
#include "prepfs/cache/kv_store.h"
#include "prepfs/common/forms.h"
#include "prepfs/common/function_ref.h"
#include "prepfs/common/stats.h"

namespace prepfs {

struct SharedTierConfig {
  std::chrono::milliseconds lease_ttl{10000};  // in whole seconds in memcached (at least 1)
  std::chrono::milliseconds first_poll{2};
  std::chrono::milliseconds max_poll{50};
  // Entries filled here and not yet stored for the others: at most this many bytes are held.
  uint64_t publish_queue_bytes = 64ull << 20;
  // At stop, lease returns still queued are given back for this long; past it the rest are left
  // to expire (a slow server, a call just under shared_timeout each, held the stop for as many
  // calls as were queued: minutes).
  std::chrono::milliseconds stop_grace{2000};
};

struct SharedCounters {
  struct PerForm {
    std::atomic<uint64_t> hits{0}, hit_bytes{0};
    std::atomic<uint64_t> misses{0};                         // misses this node filled (fetched or rendered)
    std::atomic<uint64_t> published{0}, published_bytes{0};  // entries this node stored for the others
    std::atomic<uint64_t> leases{0};                         // fills this node did under a lease
    std::atomic<uint64_t> lease_waits{0};                    // misses that waited for another node's fill
    std::atomic<uint64_t> lease_wait_hits{0};                // ... and got its entry
    std::atomic<uint64_t> lease_timeouts{0};                 // ... and gave up after lease_ttl (filled here)
    std::atomic<uint64_t> corrupt{0};                        // values that failed their checks (refetched)
    std::atomic<uint64_t> errors{0};                         // calls that failed (server down, slow, unreachable)
  } by_form[kForms];
  // Lookups timed for the profiler: round trips of the entry's lookup (found or not) and the
  // bytes of the entries found.
  std::atomic<uint64_t> gets{0}, get_ns{0};
  std::atomic<uint64_t> hit_bytes{0}, hit_ns{0};
  LatencyHistogram get_latency;
  // The publishing queue: entries waiting to be stored, their bytes, and entries not published
  // because the queue was full (a slow or hung server) or the daemon stopped first.
  std::atomic<uint64_t> publish_queued{0}, publish_queued_bytes{0}, publish_dropped{0};
  std::atomic<uint64_t> errors_publishing{0};  // the publishing thread's own failures (out of memory)
};

class SharedTier {
 public:
  SharedTier(std::unique_ptr<KvStore> store, SharedTierConfig cfg = {});
  // Entries still queued are not published; their leases are given back.
  ~SharedTier();
  SharedTier(const SharedTier&) = delete;
  SharedTier& operator=(const SharedTier&) = delete;

  // Which forms the plan keeps in the shared tier (augmented is never: a variant belongs to one
  // node's sequence of opens).
  void set_forms(const std::array<bool, kForms>& forms);
  std::array<bool, kForms> forms() const;
  bool shares(Form f) const { return forms_[index_of(f)].load(std::memory_order_relaxed); }

  struct Result {
    ChunkRef chunk;
    bool hit = false;  // from the shared tier (else from fill())
  };
  // See the top of this file. fill()'s exceptions propagate (the lease is given back first).
  Result get_or_fill(const CacheKey& key, Form form, FunctionRef<ChunkRef()> fill);
  // The entry if the shared tier holds a valid one; nullptr otherwise (miss, invalid, failure).
  ChunkRef get(const CacheKey& key, Form form);
  // Stores the entry for the other nodes now, on the caller's thread (best effort: a failure is
  // counted, never thrown). get_or_fill's fills are published by the publishing thread instead.
  void publish(const CacheKey& key, Form form, const Chunk& chunk);
  // Returns once every entry queued so far is stored (or has failed to be), and its lease is gone.
  void drain();

  const SharedCounters& counters() const { return counters_; }
  KvStore& store() { return *store_; }
  const SharedTierConfig& config() const { return cfg_; }

 private:
  enum class Found { entry, leased, nothing, failed };
  void store_entry(const CacheKey& key, Form form, const Chunk& chunk);  // publish(), which may throw
  // One round trip for the head and the lease; then the other pieces when there are any.
  Found lookup(const CacheKey& key, Form form, ChunkRef* out);
  ChunkRef assemble(const CacheKey& key, Form form, std::span<const char> head, bool* failed);

  // An entry for the publishing thread; lease: the value of the lease to give back once it is
  // stored (empty: none, as after a lease wait that timed out); no chunk: only the lease to give
  // back; since: when the lease was taken (or the entry filled, without one).
  struct Pending {
    CacheKey key;
    Form form;
    ChunkRef chunk;
    std::string lease;
    std::chrono::steady_clock::time_point since{};
  };
  void publish_later(Pending p);  // never throws: the reader has its bytes whatever happens here
  void publishing_loop();
  static uint64_t queue_cost(const Pending& p);
  ChunkRef queued(const CacheKey& key, Form form);  // the entry if it waits to be published here
  static constexpr size_t kMaxQueued = 65536;  // lease returns past a full queue (each ~100 bytes)

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_, drained_cv_;
  std::deque<Pending> queue_;
  uint64_t queue_bytes_ = 0;
  bool publishing_ = false;  // the thread holds an entry taken off the queue
  Pending in_flight_;        // ... that one (its key, form and chunk)
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_deadline_;  // set with stopping_
  std::thread publisher_;  // started in the constructor's body, once every member is built

  std::unique_ptr<KvStore> store_;
  SharedTierConfig cfg_;
  SharedCounters counters_;
  std::array<std::atomic<bool>, kForms> forms_{};
};

}  // namespace prepfs

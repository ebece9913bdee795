// The cache as the core sees it: look a chunk up in RAM, then on SSD (promoting it to RAM), then
// in the tier shared with other nodes when there is one, and on a miss run the caller's fill
// exactly once however many readers ask at the same time, then admit the result to both tiers.
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/fill_withdrawn.h"
#include "prepfs/cache/key.h"
#include "prepfs/cache/ram_tier.h"
#include "prepfs/cache/sample_residency.h"
#include "prepfs/cache/shared_tier.h"
#include "prepfs/cache/ssd_tier.h"
#include "prepfs/common/function_ref.h"
#include "prepfs/common/stats.h"

namespace prepfs {

// Which tiers may keep what a fill produced (the partition's placement decides per sample).
// Entries already cached are served wherever they are, admitted or not.
enum class Join { wait, never };  // get_or_fill: whether to wait for another caller's fill

struct Admission {
  bool ram = true;
  bool ssd = true;
  // The entry's last use (an augmented variant's last serve): a cached copy is served and then
  // dropped, a fill is kept nowhere, not even among the recent fills; nor is the fill of a use
  // that comes after it, out of order.
  bool last_use = false;
  // Kept among the recent fills when RAM does not keep it (the file's next read requests reuse
  // it). Off for fills a caller keeps elsewhere itself (the prefetcher's staging).
  bool recent = true;
  static Admission none() { return {false, false, false, true}; }
  static Admission last() { return {false, false, true, false}; }
  static Admission staged() { return {false, false, false, false}; }
  bool any() const { return ram || ssd; }
};

struct CacheConfig {
  uint64_t ram_bytes = 0;
  uint64_t ssd_bytes = 0;
  std::string ssd_dir;  // the tier's own directory (already specific to one source)
  std::string eviction = "lru";
  // How long a reader waits for another reader's fill of the same key before giving up with
  // ETIMEDOUT (the fill itself goes on, and lands for the next reader).
  std::chrono::milliseconds fill_wait{std::chrono::seconds(60)};
  SsdTierOptions ssd_options = {};
  size_t samples = 0;                          // entries name their sample by index node id below this (residency)
  const SampleKnowledge* knowledge = nullptr;  // orders and importance, for belady/importance
  // The tier shared with other nodes (shared=), asked after both local tiers miss for the forms
  // it shares; null: none. Owned by the caller.
  SharedTier* shared = nullptr;
  // Test seam: runs on the filler's thread when its fill has failed, once its flight has ended and
  // before the readers that joined it get the error.
  std::function<void(const CacheKey&)> after_failed_fill = nullptr;
};

struct CacheCounters {
  TierCounters ram;
  TierCounters ssd;
  std::atomic<uint64_t> fills{0};  // misses of both tiers that ran the fill
  std::atomic<uint64_t> fill_errors{0};
  std::atomic<uint64_t> joined{0};         // readers that waited on another's fill
  std::atomic<uint64_t> join_timeouts{0};  // ... and gave up after CacheConfig::fill_wait
  // Per form (index: Form), as seen by get_or_fill: where each chunk request was answered.
  struct PerForm {
    std::atomic<uint64_t> ram_hits{0}, ram_hit_bytes{0};
    std::atomic<uint64_t> ssd_hits{0}, ssd_hit_bytes{0};
    std::atomic<uint64_t> shared_hits{0}, shared_hit_bytes{0};  // read from the shared tier
    std::atomic<uint64_t> misses{0}, miss_bytes{0};             // filled from the source (or a transform)
  } by_form[kForms];
};

class TierManager {
 public:
  explicit TierManager(const CacheConfig& cfg);  // throws Error when ssd_dir is unusable
  ~TierManager();

  using Fill = FunctionRef<ChunkRef()>;
  // Returns the chunk for key. On a miss of both tiers runs fill() once (concurrent callers of
  // the same key wait for that one run) and admits what it returns to the tiers `admit` names
  // (an SSD hit is promoted to RAM only when RAM is admitted). A chunk the RAM tier does not keep
  // (not admitted, or refused) joins its recent fills, so the next read requests of the same file
  // (the kernel splits a file into several) do not fetch or render it again; with admit.last_use
  // it is kept nowhere and a cached copy is dropped once returned. fill's exceptions propagate to every waiter;
  // nothing is admitted then. A caller waiting for another's fill gives up after cfg.fill_wait
  // (ETIMEDOUT). Whatever RAM keeps is also queued to the SSD tier as a spare copy while the SSD
  // budget has room, so a restart starts warm (see SsdTier).
  // `sample` owns the entry (kNoSample: none): residency and ranking policies count by it.
  // With Join::never, a fill of key already under way is not waited for: null comes back at once.
  // A caller holding a CPU slot passes it, since that fill may be waiting for the very slot.
  ChunkRef get_or_fill(const CacheKey& key, Form form, Fill fill, Admission admit = {}, uint32_t sample = kNoSample,
                       Join join = Join::wait);
  // A chunk the caller fetched with a smaller admission (a probe's first chunk, fetched among the
  // recent fills before the index knew the file for a sample), kept now as `admit` says, as its
  // fill would have kept it: an erase meanwhile wins the same way. get_or_fill cannot do this: it
  // serves a recent fill as it is. Nothing happens while a fill of the key is under way (that
  // fill admits as its own caller says).
  void keep(const CacheKey& key, ChunkRef chunk, Form form, Admission admit, uint32_t sample = kNoSample);
  // Whether the shared tier keeps this form (the plan's choice), so a fill of it is shared.
  bool shares(Form form) const { return cfg_.shared && cfg_.shared->shares(form); }
  SharedTier* shared() { return cfg_.shared; }
  // Whether a tier (or the recent fills) holds key, without filling anything.
  bool contains(const CacheKey& key);
  // Whether a tier holds key (the recent fills not counted: they may drop it any time).
  bool in_tier(const CacheKey& key) const;
  // A sample was read: its next use (and so its rank under belady) changed.
  void sample_changed(uint32_t sample);
  SampleResidency& residency() { return residency_; }  // the staging counts its samples too
  const SampleResidency& residency() const { return residency_; }

  // The chunk if a tier holds it (RAM, its recent fills, then SSD), without
  // filling or admitting anything.
  ChunkRef lookup(const CacheKey& key);
  // From both tiers; a fill of key under way then serves its chunk without keeping it.
  void erase(const CacheKey& key);

  // The partition as fractions of each tier per form (raw, decoded, augmented), each tier's
  // summing to at most 1. A lowered share evicts nothing at once: entries above it are the first
  // to go when another form needs room (gradual migration, never a flush).
  void set_partition(const std::array<double, kForms>& ram_shares, const std::array<double, kForms>& ssd_shares);

  // Both tiers, at once: queued SSD writes are dropped, never waited for.
  void evict_all();
  // Waits for queued SSD writes, at most `timeout`; false when some were still queued.
  bool flush(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  const CacheCounters& counters() const { return counters_; }
  // One tier's snapshot (an absent SSD tier holds nothing and has no budget).
  TierStats stats(Tier t) const;
  RamTier& ram() { return *ram_; }
  SsdTier* ssd() { return ssd_.get(); }  // null when ssd=0

 private:
  // Ends a flight that did not land (its fill threw): the in-flight entry and any erase mark go.
  struct FlightEnd {
    TierManager* self;
    const CacheKey& key;
    bool ended = false;
    void end();
    ~FlightEnd() { end(); }
  };
  // A flight's chunk kept as `admit` says, and the flight ended (see get_or_fill). from_fill: the
  // SSD does not hold the chunk already, so an SSD admission or a spare copy is queued.
  void land(const CacheKey& key, const ChunkRef& chunk, Form form, Admission admit, uint32_t sample, bool from_fill,
            FlightEnd* flight);

  CacheConfig cfg_;
  CacheCounters counters_;
  SampleResidency residency_;  // before the tiers, which count into it
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<SsdTier> ssd_;
  std::mutex inflight_mu_;
  std::unordered_map<CacheKey, std::shared_future<ChunkRef>, CacheKeyHash> inflight_;
  std::unordered_set<CacheKey, CacheKeyHash> erased_while_filling_;  // keys in inflight_ erased meanwhile
  // The keys whose last use has come, the latest kSpentKeys (under inflight_mu_). An earlier use
  // of the key that reaches the cache after it (two opens of one variant, out of order) keeps
  // nothing: its admission would keep an entry nobody asks for again, until evicted. A key's
  // uses are close together (one variant's aug_reuse opens), so a short memory suffices.
  static constexpr size_t kSpentKeys = 4096;
  std::unordered_set<CacheKey, CacheKeyHash> spent_;
  std::deque<CacheKey> spent_order_;
  void note_spent(const CacheKey& key);
};

}  // namespace prepfs

// The RAM tier: chunks held by reference under a byte budget. A hit hands out the same chunk
// the tier holds (no copy, no allocation). The budget also holds the recent fills (fills no tier
// admitted, kept for the file's next read requests): they use the room the entries leave free and
// are the first to give it back, but always keep kRecentFloor, so a read split into several
// requests fetches each chunk once even when the entries fill the budget (or the budget is 0).
#pragma once

#include <mutex>
#include <unordered_map>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/recent_fills.h"
#include "prepfs/cache/tier_index.h"
#include "prepfs/common/stats.h"

namespace prepfs {

struct RecentStats {
  uint64_t bytes = 0;
  size_t entries = 0;
};

class RamTier {
 public:
  // Eight 1 MiB chunks: the requests of a few files read at once, beyond the budget at worst.
  static constexpr uint64_t kRecentFloor = 8ull << 20;

  // residency (may be null) counts each sample's entries over all tiers.
  RamTier(uint64_t budget, std::unique_ptr<EvictionPolicy> policy, TierCounters& counters,
          SampleResidency* residency = nullptr);

  ChunkRef get(const CacheKey& key);  // null on a miss
  // false when not admitted; `sample` owns the entry (residency, ranking policies).
  bool put(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample = kNoSample);
  void sample_changed(uint32_t sample);  // its next use changed: re-rank its entries
  bool erase(const CacheKey& key);       // the entry and a recent fill of key
  void set_form_quotas(const std::array<uint64_t, kForms>& quotas);
  void clear();  // entries and recent fills

  ChunkRef get_recent(const CacheKey& key);  // null when not among the recent fills
  bool has_recent(const CacheKey& key);      // the same, without taking it
  // Keeps a fill no tier admitted; false when it does not fit the room left to recent fills.
  bool put_recent(const CacheKey& key, ChunkRef chunk);

  TierStats stats() const;  // budget, bytes and entries, per form too, in one snapshot
  RecentStats recent_stats() const;
  bool contains(const CacheKey& key) const;

 private:
  uint64_t recent_room(uint64_t incoming) const;  // under mu_

  mutable std::mutex mu_;
  TierIndex index_;
  std::unordered_map<CacheKey, ChunkRef, CacheKeyHash> chunks_;
  RecentFills recent_;
  TierCounters& counters_;
};

}  // namespace prepfs

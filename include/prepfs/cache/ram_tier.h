// The RAM tier: chunks held by reference under a byte budget. A hit hands out the same chunk
// the tier holds (no copy, no allocation).
#pragma once

#include <mutex>
#include <unordered_map>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/tier_index.h"
#include "prepfs/common/stats.h"

namespace prepfs {

class RamTier {
 public:
  RamTier(uint64_t budget, std::unique_ptr<EvictionPolicy> policy, TierCounters& counters,
          SampleResidency* residency = nullptr);

  ChunkRef get(const CacheKey& key);  // null on a miss
  // false when not admitted; `sample` owns the entry (residency, ranking policies).
  bool put(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample = kNoSample);
  void sample_changed(uint32_t sample);
  bool erase(const CacheKey& key);
  void set_form_quotas(const std::array<uint64_t, kForms>& quotas);
  void clear();

  TierStats stats() const;  // budget, bytes and entries, per form too, in one snapshot
  bool contains(const CacheKey& key) const;

 private:
  mutable std::mutex mu_;
  TierIndex index_;
  std::unordered_map<CacheKey, ChunkRef, CacheKeyHash> chunks_;
  TierCounters& counters_;
};

}  // namespace prepfs

#include "prepfs/cache/ram_tier.h"

namespace prepfs {

RamTier::RamTier(uint64_t budget, std::unique_ptr<EvictionPolicy> policy, TierCounters& counters,
                 SampleResidency* residency)
    : index_(budget, std::move(policy), residency), counters_(counters) {}

ChunkRef RamTier::get(const CacheKey& key) {
  std::lock_guard lock(mu_);
  auto it = chunks_.find(key);
  if (it == chunks_.end()) {
    bump(counters_.misses);
    return nullptr;
  }
  index_.touch(key);
  bump(counters_.hits);
  bump(counters_.hit_bytes, it->second->size());
  return it->second;
}

bool RamTier::put(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample) {
  std::vector<CacheKey> evicted;
  std::vector<ChunkRef> released;  // freed after the lock is dropped: large frees are slow
  {
    std::lock_guard lock(mu_);
    if (!index_.admit(key, chunk->size(), form, &evicted, sample)) {
      bump(counters_.rejected);
      return false;
    }
    for (const CacheKey& k : evicted) {
      auto it = chunks_.find(k);
      released.push_back(std::move(it->second));
      chunks_.erase(it);
    }
    chunks_[key] = std::move(chunk);
  }
  bump(counters_.inserts);
  bump(counters_.evictions, evicted.size());
  return true;
}

bool RamTier::erase(const CacheKey& key) {
  std::lock_guard lock(mu_);
  chunks_.erase(key);
  return index_.remove(key);
}

void RamTier::set_form_quotas(const std::array<uint64_t, kForms>& quotas) {
  std::lock_guard lock(mu_);
  index_.set_form_quotas(quotas);
}

void RamTier::clear() {
  std::unordered_map<CacheKey, ChunkRef, CacheKeyHash> old;
  std::lock_guard lock(mu_);
  for (const CacheKey& k : index_.keys()) index_.remove(k);
  old.swap(chunks_);
}

bool RamTier::contains(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  return index_.contains(key);
}

void RamTier::sample_changed(uint32_t sample) {
  std::lock_guard lock(mu_);
  index_.sample_changed(sample);
}

TierStats RamTier::stats() const {
  std::lock_guard lock(mu_);
  return index_.stats();
}

}  // namespace prepfs

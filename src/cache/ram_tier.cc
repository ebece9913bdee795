#include "prepfs/cache/ram_tier.h"

#include <algorithm>

namespace prepfs {

RamTier::RamTier(uint64_t budget, std::unique_ptr<EvictionPolicy> policy, TierCounters& counters,
                 SampleResidency* residency)
    : index_(budget, std::move(policy), residency), counters_(counters) {}

void RamTier::sample_changed(uint32_t sample) {
  std::lock_guard lock(mu_);
  index_.sample_changed(sample);
}

uint64_t RamTier::recent_room(uint64_t incoming) const {
  const uint64_t used = index_.bytes() + incoming;
  return std::max(index_.budget() > used ? index_.budget() - used : 0, kRecentFloor);
}

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
    // The recent fills give their room first: they are the cheapest bytes to lose.
    if (ChunkRef same = recent_.erase(key)) released.push_back(std::move(same));
    recent_.shrink_to(recent_room(chunk->size()), &released);
    const bool admitted = index_.admit(key, chunk->size(), form, &evicted, sample);
    // What left the index leaves the tier, admitted or not (a refusal may follow evictions).
    for (const CacheKey& k : evicted) {
      auto it = chunks_.find(k);
      if (it == chunks_.end()) continue;
      released.push_back(std::move(it->second));
      chunks_.erase(it);
    }
    bump(counters_.evictions, evicted.size());
    if (!admitted) {
      bump(counters_.rejected);
      return false;
    }
    chunks_[key] = std::move(chunk);
  }
  bump(counters_.inserts);
  return true;
}

bool RamTier::has_recent(const CacheKey& key) {
  std::lock_guard lock(mu_);
  return recent_.get(key) != nullptr;
}

ChunkRef RamTier::get_recent(const CacheKey& key) {
  std::lock_guard lock(mu_);
  return recent_.get(key);
}

bool RamTier::put_recent(const CacheKey& key, ChunkRef chunk) {
  std::vector<ChunkRef> released;
  std::lock_guard lock(mu_);
  if (index_.contains(key)) return true;
  return recent_.put(key, std::move(chunk), recent_room(0), &released);
}

bool RamTier::erase(const CacheKey& key) {
  ChunkRef entry, recent;
  std::lock_guard lock(mu_);
  recent = recent_.erase(key);
  if (auto it = chunks_.find(key); it != chunks_.end()) {
    entry = std::move(it->second);
    chunks_.erase(it);
  }
  return index_.remove(key);
}

void RamTier::set_form_quotas(const std::array<uint64_t, kForms>& quotas) {
  std::lock_guard lock(mu_);
  index_.set_form_quotas(quotas);
}

void RamTier::clear() {
  std::unordered_map<CacheKey, ChunkRef, CacheKeyHash> old;
  std::vector<ChunkRef> recent;
  std::lock_guard lock(mu_);
  for (const CacheKey& k : index_.keys()) index_.remove(k);
  old.swap(chunks_);
  recent_.clear(&recent);
}

bool RamTier::contains(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  return index_.contains(key);
}

TierStats RamTier::stats() const {
  std::lock_guard lock(mu_);
  return index_.stats();
}

RecentStats RamTier::recent_stats() const {
  std::lock_guard lock(mu_);
  return RecentStats{recent_.bytes(), recent_.entries()};
}

}  // namespace prepfs

#include "prepfs/cache/tier_manager.h"

#include <algorithm>

namespace prepfs {

TierManager::TierManager(const CacheConfig& cfg) : residency_(cfg.samples) {
  ram_ = std::make_unique<RamTier>(cfg.ram_bytes, make_policy(cfg.eviction, 1, cfg.knowledge), counters_.ram,
                                   &residency_);
  if (cfg.ssd_bytes > 0)
    ssd_ = std::make_unique<SsdTier>(cfg.ssd_dir, cfg.ssd_bytes, make_policy(cfg.eviction, 2, cfg.knowledge),
                                     counters_.ssd, &residency_);
}

bool TierManager::contains(const CacheKey& key) {
  if (ram_->contains(key) || (ssd_ && ssd_->contains(key))) return true;
  std::lock_guard lock(recent_mu_);
  for (const auto& [k, c] : recent_)
    if (c && k == key) return true;
  return false;
}

void TierManager::sample_changed(uint32_t sample) {
  ram_->sample_changed(sample);
  if (ssd_) ssd_->sample_changed(sample);
}

TierManager::~TierManager() = default;

ChunkRef TierManager::recent_get(const CacheKey& key) {
  std::lock_guard lock(recent_mu_);
  for (const auto& [k, c] : recent_)
    if (c && k == key) return c;
  return nullptr;
}

void TierManager::recent_put(const CacheKey& key, const ChunkRef& chunk) {
  std::lock_guard lock(recent_mu_);
  recent_[recent_next_] = {key, chunk};
  recent_next_ = (recent_next_ + 1) % kRecent;
}

ChunkRef TierManager::get_or_fill(const CacheKey& key, Form form, Fill fill, Admission admit, uint32_t sample) {
  auto& pf = counters_.by_form[index_of(form)];
  // A last use takes a cached copy with it: nobody will ask for this entry again.
  auto served = [&](ChunkRef c) {
    if (admit.last_use) erase(key);
    return c;
  };
  if (ChunkRef hit = ram_->get(key)) {
    bump(pf.ram_hits);
    bump(pf.ram_hit_bytes, hit->size());
    return served(std::move(hit));
  }
  if (ChunkRef recent = recent_get(key)) return served(std::move(recent));

  std::promise<ChunkRef> promise;
  {
    std::unique_lock lock(inflight_mu_);
    auto it = inflight_.find(key);
    if (it != inflight_.end()) {
      std::shared_future<ChunkRef> pending = it->second;
      lock.unlock();
      bump(counters_.joined);
      return served(pending.get());  // rethrows the filler's error
    }
    inflight_.emplace(key, promise.get_future().share());
  }
  // Whatever happens below, the in-flight entry goes and the waiters are answered.
  struct Done {
    TierManager* self;
    const CacheKey& key;
    ~Done() {
      std::lock_guard lock(self->inflight_mu_);
      self->inflight_.erase(key);
    }
  } done{this, key};

  try {
    ChunkRef chunk = ssd_ ? ssd_->get(key, sample) : nullptr;
    if (!chunk) {
      bump(counters_.fills);
      chunk = fill();
      bump(pf.misses);
      bump(pf.miss_bytes, chunk->size());
      if (ssd_ && admit.ssd) ssd_->put_async(key, chunk, form, sample);
    } else {
      bump(pf.ssd_hits);
      bump(pf.ssd_hit_bytes, chunk->size());
      if (admit.last_use) ssd_->erase(key);
    }
    // Not going to RAM: keep it at hand for the file's next read requests (an SSD admission is
    // queued, and may not be readable back for a while).
    if (admit.ram)
      ram_->put(key, chunk, form, sample);
    else if (admit.recent)
      recent_put(key, chunk);
    promise.set_value(chunk);
    return chunk;
  } catch (...) {
    bump(counters_.fill_errors);
    promise.set_exception(std::current_exception());
    throw;
  }
}

ChunkRef TierManager::lookup(const CacheKey& key) {
  if (ChunkRef hit = ram_->get(key)) return hit;
  if (ChunkRef recent = recent_get(key)) return recent;
  return ssd_ ? ssd_->get(key) : nullptr;
}

void TierManager::erase(const CacheKey& key) {
  {
    std::lock_guard lock(recent_mu_);
    for (auto& [k, c] : recent_)
      if (c && k == key) c.reset();
  }
  ram_->erase(key);
  if (ssd_) ssd_->erase(key);
}

void TierManager::set_partition(const std::array<double, kForms>& ram_shares,
                                const std::array<double, kForms>& ssd_shares) {
  auto quotas = [](uint64_t budget, const std::array<double, kForms>& shares) {
    std::array<uint64_t, kForms> q{};
    for (size_t f = 0; f < kForms; f++) q[f] = static_cast<uint64_t>(double(budget) * std::clamp(shares[f], 0.0, 1.0));
    return q;
  };
  ram_->set_form_quotas(quotas(ram_->stats().budget, ram_shares));
  if (ssd_) ssd_->set_form_quotas(quotas(ssd_->stats().budget, ssd_shares));
}

TierStats TierManager::stats(Tier t) const {
  if (t == Tier::ram) return ram_->stats();
  return ssd_ ? ssd_->stats() : TierStats{};
}

void TierManager::evict_all() {
  {
    std::lock_guard lock(recent_mu_);
    recent_.fill({});
  }
  ram_->clear();
  if (ssd_) ssd_->clear();
}

void TierManager::flush() {
  if (ssd_) ssd_->flush();
}

}  // namespace prepfs

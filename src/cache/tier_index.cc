#include "prepfs/cache/tier_index.h"

#include <algorithm>

namespace prepfs {

TierIndex::TierIndex(uint64_t budget, std::unique_ptr<EvictionPolicy> policy, SampleResidency* residency)
    : budget_(budget), policy_(std::move(policy)), residency_(residency) {
  quota_.fill(UINT64_MAX);
}

void TierIndex::erase_entry(std::unordered_map<CacheKey, Meta, CacheKeyHash>::iterator it) {
  size_t f = static_cast<size_t>(it->second.form);
  bytes_ -= it->second.size;
  form_bytes_[f] -= it->second.size;
  form_entries_[f]--;
  policy_->on_erase(it->first);
  if (form_policy_[f]) form_policy_[f]->on_erase(it->first);
  if (residency_) residency_->remove(it->second.sample);
  entries_.erase(it);
}

bool TierIndex::admit(const CacheKey& key, uint64_t size, Form form, std::vector<CacheKey>* evicted, uint32_t sample) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (it->second.size == size) {
      policy_->on_access(key);
      if (form_policy_[static_cast<size_t>(it->second.form)])
        form_policy_[static_cast<size_t>(it->second.form)]->on_access(key);
      return true;
    }
    erase_entry(it);  // same key, other size: cannot happen with versioned keys, but stay exact
    if (evicted) evicted->push_back(key);
  }
  const size_t fi = static_cast<size_t>(form);
  if (size > budget_ || size > quota_[fi]) return false;
  auto evict = [&](const CacheKey& v) {
    erase_entry(entries_.find(v));
    if (evicted) evicted->push_back(v);
  };
  if (form_policy_[fi] && form_bytes_[fi] + size > quota_[fi]) {
    // A form at its quota refuses: the partition chose which samples to keep (the Placer), and
    // under uniform sampling evicting one kept sample for another only churns (each eviction is a
    // future miss that evicts the next one). A policy that ranks samples chooses the members
    // itself: the form's worst entry goes if this one ranks better.
    if (!form_policy_[fi]->chooses_members()) return false;
    std::optional<CacheKey> v = form_policy_[fi]->victim();
    if (!v || form_policy_[fi]->keeps_over(*v, sample)) return false;
    while (v && form_bytes_[fi] + size > quota_[fi]) {
      evict(*v);
      v = form_policy_[fi]->victim();
    }
    if (form_bytes_[fi] + size > quota_[fi]) return false;
  }
  // Only a policy that never evicts can run out of victims while over budget (LRU and random
  // always have one while bytes_ > 0). A ranking policy may keep its first victim over this
  // entry; that is decided before the budget evicts anything (the form's step above may have
  // evicted already: those are in *evicted all the same).
  bool first = true;
  while (bytes_ + size > budget_) {
    std::optional<CacheKey> v = victim_for_room();
    if (!v || (first && policy_->keeps_over(*v, sample))) return false;
    first = false;
    evict(*v);
  }
  entries_[key] = Meta{size, form, sample};
  bytes_ += size;
  form_bytes_[static_cast<size_t>(form)] += size;
  form_entries_[static_cast<size_t>(form)]++;
  policy_->on_insert(key, sample);
  if (form_policy_[fi]) form_policy_[fi]->on_insert(key, sample);
  if (residency_) residency_->add(sample);
  return true;
}

void TierIndex::adopt(const CacheKey& key, uint32_t sample) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.sample != kNoSample || sample == kNoSample) return;
  it->second.sample = sample;
  if (residency_) residency_->add(sample);
  const size_t f = static_cast<size_t>(it->second.form);
  policy_->on_erase(key);
  policy_->on_insert(key, sample);
  if (form_policy_[f]) {
    form_policy_[f]->on_erase(key);
    form_policy_[f]->on_insert(key, sample);
  }
}

void TierIndex::sample_changed(uint32_t sample) {
  policy_->on_sample_changed(sample);
  for (auto& fp : form_policy_)
    if (fp) fp->on_sample_changed(sample);
}

bool TierIndex::touch(const CacheKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  policy_->on_access(key);
  if (auto& fp = form_policy_[static_cast<size_t>(it->second.form)]) fp->on_access(key);
  return true;
}

std::array<uint64_t, kForms> TierIndex::quotas_of(uint64_t budget, const std::array<double, kForms>& shares) {
  std::array<uint64_t, kForms> q{};
  for (size_t f = 0; f < kForms; f++) q[f] = static_cast<uint64_t>(double(budget) * std::clamp(shares[f], 0.0, 1.0));
  return q;
}

void TierIndex::set_form_quotas(const std::array<uint64_t, kForms>& quotas) {
  quota_ = quotas;
  for (size_t f = 0; f < kForms; f++) {
    if (form_policy_[f]) continue;
    // Seed the form's policy with the entries it already holds (in no particular order: the
    // first quota evictions after a change of partition are arbitrary among that form).
    form_policy_[f] = policy_->make_empty();
    for (const auto& [k, m] : entries_)
      if (static_cast<size_t>(m.form) == f) form_policy_[f]->on_insert(k, m.sample);
  }
}

std::optional<CacheKey> TierIndex::victim_for_room() {
  // A form above its quota (the partition moved away from it) gives room first: migration to a
  // new partition evicts old entries only as the new ones arrive, so hits on the old placement
  // keep coming until the new one is in place.
  for (size_t f = 0; f < kForms; f++) {
    if (!form_policy_[f] || form_bytes_[f] <= quota_[f]) continue;
    if (std::optional<CacheKey> v = form_policy_[f]->victim()) return v;
    for (const auto& [k, m] : entries_)  // a no-eviction policy still yields to a lowered quota
      if (static_cast<size_t>(m.form) == f) return k;
  }
  return policy_->victim();
}

bool TierIndex::remove(const CacheKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  erase_entry(it);
  return true;
}

void TierIndex::set_budget(uint64_t budget, std::vector<CacheKey>* evicted) {
  budget_ = budget;
  while (bytes_ > budget_) {
    std::optional<CacheKey> v = victim_for_room();  // forms above their quota go first, as in admit
    if (!v) v = entries_.begin()->first;            // no-eviction policy: shrinking must still hold the budget
    if (evicted) evicted->push_back(*v);
    erase_entry(entries_.find(*v));
  }
}

std::vector<CacheKey> TierIndex::keys() const {
  std::vector<CacheKey> out;
  out.reserve(entries_.size());
  for (const auto& [k, m] : entries_) out.push_back(k);
  return out;
}

}  // namespace prepfs

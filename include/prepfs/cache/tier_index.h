// Byte-budget accounting shared by the RAM and SSD tiers: which keys a tier holds, how large
// they are, and which to evict to make room. Not thread-safe; each tier holds its own lock.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "prepfs/cache/key.h"
#include "prepfs/cache/policy.h"
#include "prepfs/cache/sample_residency.h"

namespace prepfs {

// What a tier holds, as one consistent snapshot (taken under the tier's lock).
struct TierStats {
  uint64_t budget = 0;
  uint64_t bytes = 0;
  size_t entries = 0;
  std::array<uint64_t, kForms> form_bytes{};
  std::array<size_t, kForms> form_entries{};
  std::array<uint64_t, kForms> form_quota{};  // UINT64_MAX: no quota
  uint64_t bytes_of(Form f) const { return form_bytes[index_of(f)]; }
  size_t entries_of(Form f) const { return form_entries[index_of(f)]; }
  uint64_t quota_of(Form f) const { return form_quota[index_of(f)]; }
};

class TierIndex {
 public:
  // residency (may be null) counts the entries of each sample, shared by every tier.
  TierIndex(uint64_t budget, std::unique_ptr<EvictionPolicy> policy, SampleResidency* residency = nullptr);

  // Records key (an entry of `sample`) with size bytes after evicting what the policy chooses to
  // make room. Returns false when the entry cannot fit (larger than the budget, or the policy does
  // not evict, or a policy that ranks samples keeps its victim over this one). Evicted keys are
  // appended to *evicted for the caller to release, admitted or not: a refusal can come after
  // some evictions (the form's own, to its quota, then the budget's victim ranks better).
  bool admit(const CacheKey& key, uint64_t size, Form form, std::vector<CacheKey>* evicted,
             uint32_t sample = kNoSample);
  // The next use or importance of a sample changed: its entries are re-ranked.
  void sample_changed(uint32_t sample);
  // Names the sample of an entry that had none (found on disk at start): it then counts for the
  // sample's residency and ranks by it.
  void adopt(const CacheKey& key, uint32_t sample);
  bool touch(const CacheKey& key);  // true when present; counts as a use for the policy
  bool contains(const CacheKey& key) const { return entries_.count(key) != 0; }
  // The size an entry was admitted with, 0 when absent.
  uint64_t size_of(const CacheKey& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? 0 : it->second.size;
  }
  bool remove(const CacheKey& key);  // true when it was present
  // Lowers (or raises) the budget, evicting down to it. Used when the SSD turns out to be full.
  void set_budget(uint64_t budget, std::vector<CacheKey>* evicted);
  // Per-form byte quotas within the budget (the partition: how much of this tier each form may
  // hold). A form at its quota refuses new entries instead of evicting its own: what to keep is
  // decided by the placement, and trading one kept sample for another only churns. Under a
  // policy that ranks samples (belady, importance) the policy decides instead: a form at its
  // quota evicts its own lowest-ranked entry for a better one. Lowering a
  // quota evicts nothing at once: a form above its quota is the first to give room (by its own
  // policy) when another entry needs it, so the tier migrates to a new partition gradually, never
  // by a flush. Without quotas every form may use the whole budget.
  void set_form_quotas(const std::array<uint64_t, kForms>& quotas);
  // The quotas that give each form its share (0..1) of a budget.
  static std::array<uint64_t, kForms> quotas_of(uint64_t budget, const std::array<double, kForms>& shares);
  uint64_t form_quota(Form f) const { return quota_[static_cast<size_t>(f)]; }

  TierStats stats() const { return TierStats{budget_, bytes_, entries_.size(), form_bytes_, form_entries_, quota_}; }
  uint64_t budget() const { return budget_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t bytes(Form f) const { return form_bytes_[static_cast<size_t>(f)]; }
  size_t entries() const { return entries_.size(); }
  size_t entries(Form f) const { return form_entries_[static_cast<size_t>(f)]; }
  std::vector<CacheKey> keys() const;
  const char* policy_name() const { return policy_->name(); }

 private:
  struct Meta {
    uint64_t size;
    Form form;
    uint32_t sample;
  };
  std::optional<CacheKey> victim_for_room();
  void erase_entry(std::unordered_map<CacheKey, Meta, CacheKeyHash>::iterator it);

  uint64_t budget_;
  uint64_t bytes_ = 0;
  std::array<uint64_t, kForms> form_bytes_{};
  std::array<size_t, kForms> form_entries_{};
  std::unordered_map<CacheKey, Meta, CacheKeyHash> entries_;
  std::unique_ptr<EvictionPolicy> policy_;
  SampleResidency* residency_;
  std::array<uint64_t, kForms> quota_;
  std::array<std::unique_ptr<EvictionPolicy>, kForms> form_policy_;  // set with quotas only
};

}  // namespace prepfs

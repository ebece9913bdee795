// Eviction policies behind one interface. A tier tells the policy what it inserts (and for which
// sample), touches and erases, and asks it for a victim when it needs room. Not thread-safe: the
// tier's lock covers it.
//
//   lru        least recently used (the default without a published order)
//   lfu        least frequently used, ties by recency
//   random     a uniformly random victim
//   none       never evicts: once full, nothing new is admitted (MinIO-style)
//   belady     farthest next use in the published orders (exact MIN for one job), entries with no
//              known next use first (least recently used among them)
//   importance least important sample first (per-sample loss), with ghosts of evicted samples
// Policies that know the future or the importance also refuse an admission worth less than the
// entry it would push out (keeps_over).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "prepfs/cache/key.h"
#include "prepfs/cache/sample_knowledge.h"

namespace prepfs {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void on_insert(const CacheKey& k, uint32_t sample) = 0;
  void on_insert(const CacheKey& k) { on_insert(k, kNoSample); }
  virtual void on_access(const CacheKey& k) = 0;
  virtual void on_erase(const CacheKey& k) = 0;
  // The entry to evict next; nullopt when empty or when the policy never evicts.
  virtual std::optional<CacheKey> victim() = 0;
  // True to keep `victim` rather than admit an entry of `newcomer`.
  virtual bool keeps_over(const CacheKey& /*victim*/, uint32_t /*newcomer*/) { return false; }
  // The next use or importance of one sample changed (it was just read): re-rank its entries.
  virtual void on_sample_changed(uint32_t /*sample*/) {}
  // True when the policy ranks samples (belady, importance): it decides which samples a full
  // form keeps, instead of the placement's fixed membership.
  virtual bool chooses_members() const { return false; }
  virtual const char* name() const = 0;
  // A new, empty policy of the same kind (per-form quotas keep one per form).
  virtual std::unique_ptr<EvictionPolicy> make_empty() const = 0;
};

// Least recently used (the default).
class LruPolicy final : public EvictionPolicy {
 public:
  using EvictionPolicy::on_insert;
  void on_insert(const CacheKey& k, uint32_t sample) override;
  void on_access(const CacheKey& k) override;
  void on_erase(const CacheKey& k) override;
  std::optional<CacheKey> victim() override;
  const char* name() const override { return "lru"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<LruPolicy>(); }

 private:
  std::list<CacheKey> order_;  // front = most recent
  std::unordered_map<CacheKey, std::list<CacheKey>::iterator, CacheKeyHash> pos_;
};

// Least frequently used: the entry with the fewest accesses since it was inserted goes first,
// the least recent among equals. The training-day baseline beside LRU and random.
class LfuPolicy final : public EvictionPolicy {
 public:
  using EvictionPolicy::on_insert;
  void on_insert(const CacheKey& k, uint32_t sample) override;
  void on_access(const CacheKey& k) override;
  void on_erase(const CacheKey& k) override;
  std::optional<CacheKey> victim() override;
  const char* name() const override { return "lfu"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<LfuPolicy>(); }

 private:
  using Rank = std::tuple<uint64_t /*uses*/, uint64_t /*last use*/, CacheKey>;
  std::set<Rank> ranked_;  // begin() is the victim
  std::unordered_map<CacheKey, Rank, CacheKeyHash> rank_;
  uint64_t clock_ = 0;
};

// Uniformly random victim: the baseline that shuffled epochs make surprisingly hard to beat.
class RandomPolicy final : public EvictionPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  using EvictionPolicy::on_insert;
  void on_insert(const CacheKey& k, uint32_t sample) override;
  void on_access(const CacheKey&) override {}
  void on_erase(const CacheKey& k) override;
  std::optional<CacheKey> victim() override;
  const char* name() const override { return "random"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<RandomPolicy>(rng_()); }

 private:
  std::vector<CacheKey> keys_;
  std::unordered_map<CacheKey, size_t, CacheKeyHash> pos_;
  mutable std::mt19937_64 rng_;
};

// Never evicts: once full, new entries are not admitted (MinIO-style). Stable under shuffling.
class NoEvictionPolicy final : public EvictionPolicy {
 public:
  using EvictionPolicy::on_insert;
  void on_insert(const CacheKey&, uint32_t) override {}
  void on_access(const CacheKey&) override {}
  void on_erase(const CacheKey&) override {}
  std::optional<CacheKey> victim() override { return std::nullopt; }
  const char* name() const override { return "none"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<NoEvictionPolicy>(); }
};

// Ranks entries by a per-sample score from SampleKnowledge, re-ranking lazily: an entry's score
// is recomputed when its sample changes (on_sample_changed) and all of them when the knowledge's
// generation moves (a new order or importance file). Entries without a sample rank first to go.
class ScoredPolicy : public EvictionPolicy {
 public:
  explicit ScoredPolicy(const SampleKnowledge* knowledge) : knowledge_(knowledge) {}
  using EvictionPolicy::on_insert;
  void on_insert(const CacheKey& k, uint32_t sample) override;
  void on_access(const CacheKey& k) override;
  void on_erase(const CacheKey& k) override;
  std::optional<CacheKey> victim() override;
  bool keeps_over(const CacheKey& victim, uint32_t newcomer) override;
  void on_sample_changed(uint32_t sample) override;
  bool chooses_members() const override { return true; }

 protected:
  // Larger goes first; among equal scores the least recently used goes first.
  virtual long double score(uint32_t sample) const = 0;
  std::optional<uint32_t> sample_of(const CacheKey& k) const;
  const SampleKnowledge* knowledge_;

 private:
  struct Entry {
    uint32_t sample;
    uint64_t recency;  // a counter of accesses: larger is more recent
    long double score;
  };
  using Ranked = std::tuple<long double, uint64_t /*staleness*/, CacheKey>;
  void rank(const CacheKey& k, Entry& e);
  void refresh_if_stale();
  std::set<Ranked> ranked_;  // rbegin() is the victim
  std::unordered_map<CacheKey, Entry, CacheKeyHash> entries_;
  std::unordered_map<uint32_t, std::vector<CacheKey>> by_sample_;
  uint64_t clock_ = 0;
  uint64_t seen_generation_ = 0;
};

// Belady's MIN over the published futures: the entry whose sample is read again farthest in the
// future goes first; entries never read again go before all others, least recent first.
//
// Without any published order every entry ranks "never read again" and the order is recency:
// belady is LRU then. As "auto" (the default policy) it also leaves membership to the placement
// until an order is published (chooses_members), so a mount without orders behaves exactly as
// with lru.
class BeladyPolicy final : public ScoredPolicy {
 public:
  explicit BeladyPolicy(const SampleKnowledge* k, bool automatic = false) : ScoredPolicy(k), automatic_(automatic) {}
  const char* name() const override { return automatic_ ? "auto" : "belady"; }
  bool chooses_members() const override { return !automatic_ || (knowledge_ && knowledge_->has_future()); }
  std::unique_ptr<EvictionPolicy> make_empty() const override {
    return std::make_unique<BeladyPolicy>(knowledge_, automatic_);
  }

 protected:
  long double score(uint32_t sample) const override;

 private:
  bool automatic_;
};

// SHADE-style importance: the least important sample goes first (then the least recent). Ghosts:
// a sample evicted and asked for again soon after was worth more than its score said; its
// importance is boosted by the ghost hit (bounded list of recently evicted samples).
class ImportancePolicy final : public ScoredPolicy {
 public:
  explicit ImportancePolicy(const SampleKnowledge* k) : ScoredPolicy(k) {}
  using ScoredPolicy::on_insert;
  void on_insert(const CacheKey& k, uint32_t sample) override;
  void on_erase(const CacheKey& k) override;
  const char* name() const override { return "importance"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<ImportancePolicy>(knowledge_); }
  static constexpr size_t kGhosts = 4096;
  static constexpr double kGhostBoost = 2.0;  // a ghost hit doubles a sample's effective importance

 protected:
  long double score(uint32_t sample) const override;

 private:
  std::list<uint32_t> ghosts_;  // front: most recently evicted
  std::unordered_map<uint32_t, std::list<uint32_t>::iterator> ghost_pos_;
  std::unordered_map<uint32_t, double> boost_;  // samples re-admitted after a ghost hit
};

// "auto" | "lru" | "lfu" | "random" | "none" | "belady" | "importance"; throws Error(EINVAL) otherwise.
// belady and importance read `knowledge` (without it they rank by recency alone).
std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, uint64_t seed = 42,
                                            const SampleKnowledge* knowledge = nullptr);

}  // namespace prepfs

// Eviction policies behind one interface. A tier tells the policy what it inserts, touches and
// erases, and asks it for a victim when it needs room. Not thread-safe: the tier's lock covers it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "prepfs/cache/key.h"

namespace prepfs {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void on_insert(const CacheKey& k) = 0;
  virtual void on_access(const CacheKey& k) = 0;
  virtual void on_erase(const CacheKey& k) = 0;
  // The entry to evict next; nullopt when empty or when the policy never evicts.
  virtual std::optional<CacheKey> victim() = 0;
  virtual const char* name() const = 0;
  // A new, empty policy of the same kind (per-form quotas keep one per form).
  virtual std::unique_ptr<EvictionPolicy> make_empty() const = 0;
};

// Least recently used (the default).
class LruPolicy final : public EvictionPolicy {
 public:
  void on_insert(const CacheKey& k) override;
  void on_access(const CacheKey& k) override;
  void on_erase(const CacheKey& k) override;
  std::optional<CacheKey> victim() override;
  const char* name() const override { return "lru"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<LruPolicy>(); }

 private:
  std::list<CacheKey> order_;  // front = most recent
  std::unordered_map<CacheKey, std::list<CacheKey>::iterator, CacheKeyHash> pos_;
};

// Uniformly random victim: the baseline that shuffled epochs make surprisingly hard to beat.
class RandomPolicy final : public EvictionPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  void on_insert(const CacheKey& k) override;
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
  void on_insert(const CacheKey&) override {}
  void on_access(const CacheKey&) override {}
  void on_erase(const CacheKey&) override {}
  std::optional<CacheKey> victim() override { return std::nullopt; }
  const char* name() const override { return "none"; }
  std::unique_ptr<EvictionPolicy> make_empty() const override { return std::make_unique<NoEvictionPolicy>(); }
};

// "lru" | "random" | "none"; throws Error(EINVAL) otherwise.
std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, uint64_t seed = 42);

}  // namespace prepfs

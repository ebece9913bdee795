#include "prepfs/cache/policy.h"

#include <cerrno>

#include "prepfs/common/error.h"

namespace prepfs {

void LruPolicy::on_insert(const CacheKey& k, uint32_t) {
  auto it = pos_.find(k);
  if (it != pos_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    return;
  }
  order_.push_front(k);
  pos_[k] = order_.begin();
}

void LruPolicy::on_access(const CacheKey& k) {
  auto it = pos_.find(k);
  if (it != pos_.end()) order_.splice(order_.begin(), order_, it->second);
}

void LruPolicy::on_erase(const CacheKey& k) {
  auto it = pos_.find(k);
  if (it == pos_.end()) return;
  order_.erase(it->second);
  pos_.erase(it);
}

std::optional<CacheKey> LruPolicy::victim() {
  if (order_.empty()) return std::nullopt;
  return order_.back();
}

void RandomPolicy::on_insert(const CacheKey& k, uint32_t) {
  if (pos_.count(k)) return;
  pos_[k] = keys_.size();
  keys_.push_back(k);
}

void RandomPolicy::on_erase(const CacheKey& k) {
  auto it = pos_.find(k);
  if (it == pos_.end()) return;
  size_t i = it->second;
  pos_.erase(it);
  if (i != keys_.size() - 1) {
    keys_[i] = keys_.back();
    pos_[keys_[i]] = i;
  }
  keys_.pop_back();
}

std::optional<CacheKey> RandomPolicy::victim() {
  if (keys_.empty()) return std::nullopt;
  std::uniform_int_distribution<size_t> pick(0, keys_.size() - 1);
  return keys_[pick(rng_)];
}

void LfuPolicy::on_insert(const CacheKey& k, uint32_t) {
  if (rank_.count(k)) {
    on_access(k);
    return;
  }
  Rank r{1, ++clock_, k};
  ranked_.insert(r);
  rank_.emplace(k, r);
}

void LfuPolicy::on_access(const CacheKey& k) {
  auto it = rank_.find(k);
  if (it == rank_.end()) return;
  ranked_.erase(it->second);
  it->second = Rank{std::get<0>(it->second) + 1, ++clock_, k};
  ranked_.insert(it->second);
}

void LfuPolicy::on_erase(const CacheKey& k) {
  auto it = rank_.find(k);
  if (it == rank_.end()) return;
  ranked_.erase(it->second);
  rank_.erase(it);
}

std::optional<CacheKey> LfuPolicy::victim() {
  if (ranked_.empty()) return std::nullopt;
  return std::get<2>(*ranked_.begin());
}

std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, uint64_t seed, const SampleKnowledge* knowledge) {
  if (name == "lru") return std::make_unique<LruPolicy>();
  if (name == "lfu") return std::make_unique<LfuPolicy>();
  if (name == "random") return std::make_unique<RandomPolicy>(seed);
  if (name == "none") return std::make_unique<NoEvictionPolicy>();
  if (name == "belady") return std::make_unique<BeladyPolicy>(knowledge);
  if (name == "auto") return std::make_unique<BeladyPolicy>(knowledge, true);
  if (name == "importance") return std::make_unique<ImportancePolicy>(knowledge);
  throw Error(EINVAL,
              "unknown eviction policy '" + name + "' (expected auto, lru, lfu, random, none, belady or importance)");
}

}  // namespace prepfs

#include <algorithm>

#include "prepfs/cache/policy.h"

namespace prepfs {
namespace {

// Ranked tuples order by score, then by staleness (older larger): rbegin() is the victim.
uint64_t staleness(uint64_t recency) { return UINT64_MAX - recency; }

}  // namespace

std::optional<uint32_t> ScoredPolicy::sample_of(const CacheKey& k) const {
  auto it = entries_.find(k);
  if (it == entries_.end()) return std::nullopt;
  return it->second.sample;
}

void ScoredPolicy::rank(const CacheKey& k, Entry& e) {
  ranked_.erase(Ranked{e.score, staleness(e.recency), k});
  e.score = score(e.sample);
  ranked_.insert(Ranked{e.score, staleness(e.recency), k});
}

void ScoredPolicy::refresh_if_stale() {
  if (!knowledge_ || knowledge_->generation() == seen_generation_) return;
  seen_generation_ = knowledge_->generation();
  ranked_.clear();
  for (auto& [k, e] : entries_) {
    e.score = score(e.sample);
    ranked_.insert(Ranked{e.score, staleness(e.recency), k});
  }
}

void ScoredPolicy::on_insert(const CacheKey& k, uint32_t sample) {
  refresh_if_stale();
  auto it = entries_.find(k);
  if (it != entries_.end()) {
    on_access(k);
    return;
  }
  Entry e{sample, ++clock_, score(sample)};
  ranked_.insert(Ranked{e.score, staleness(e.recency), k});
  entries_.emplace(k, e);
  if (sample != kNoSample) by_sample_[sample].push_back(k);
}

void ScoredPolicy::on_access(const CacheKey& k) {
  auto it = entries_.find(k);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  // Re-ranked in place: the tree node is taken out, its recency changed and put back, so a hit
  // (the warm read path) allocates and frees nothing.
  auto node = ranked_.extract(Ranked{e.score, staleness(e.recency), k});
  e.recency = ++clock_;
  if (node.empty()) {
    ranked_.insert(Ranked{e.score, staleness(e.recency), k});
    return;
  }
  node.value() = Ranked{e.score, staleness(e.recency), k};
  ranked_.insert(std::move(node));
}

void ScoredPolicy::on_erase(const CacheKey& k) {
  auto it = entries_.find(k);
  if (it == entries_.end()) return;
  const Entry& e = it->second;
  ranked_.erase(Ranked{e.score, staleness(e.recency), k});
  if (e.sample != kNoSample) {
    auto s = by_sample_.find(e.sample);
    if (s != by_sample_.end()) {
      auto& keys = s->second;
      keys.erase(std::remove(keys.begin(), keys.end(), k), keys.end());
      if (keys.empty()) by_sample_.erase(s);
    }
  }
  entries_.erase(it);
}

void ScoredPolicy::on_sample_changed(uint32_t sample) {
  auto s = by_sample_.find(sample);
  if (s == by_sample_.end()) return;
  for (const CacheKey& k : s->second) rank(k, entries_.at(k));
}

std::optional<CacheKey> ScoredPolicy::victim() {
  refresh_if_stale();
  if (ranked_.empty()) return std::nullopt;
  return std::get<2>(*ranked_.rbegin());
}

bool ScoredPolicy::keeps_over(const CacheKey& victim, uint32_t newcomer) {
  refresh_if_stale();
  auto it = entries_.find(victim);
  if (it == entries_.end()) return false;
  // The newcomer would be the most recent entry: it loses only on its score.
  return score(newcomer) > it->second.score;
}

long double BeladyPolicy::score(uint32_t sample) const {
  // Never read again: before everything with a known next use.
  const uint64_t next = knowledge_ && sample != kNoSample ? knowledge_->next_use(sample) : SampleKnowledge::kNever;
  return next == SampleKnowledge::kNever ? 1e30L : static_cast<long double>(next);
}

void ImportancePolicy::on_insert(const CacheKey& k, uint32_t sample) {
  if (auto g = ghost_pos_.find(sample); g != ghost_pos_.end()) {
    // Asked for again soon after it was pushed out: it was worth more than its score said.
    double& b = boost_[sample];
    b = std::min(8.0, (b == 0 ? 1.0 : b) * kGhostBoost);
    ghosts_.erase(g->second);
    ghost_pos_.erase(g);
  }
  ScoredPolicy::on_insert(k, sample);
}

void ImportancePolicy::on_erase(const CacheKey& k) {
  std::optional<uint32_t> sample = sample_of(k);
  ScoredPolicy::on_erase(k);
  if (!sample || *sample == kNoSample || ghost_pos_.count(*sample)) return;
  ghosts_.push_front(*sample);
  ghost_pos_[*sample] = ghosts_.begin();
  if (ghosts_.size() > kGhosts) {
    ghost_pos_.erase(ghosts_.back());
    ghosts_.pop_back();
  }
}

long double ImportancePolicy::score(uint32_t sample) const {
  if (!knowledge_ || sample == kNoSample) return 0;
  double imp = knowledge_->importance(sample);
  if (auto b = boost_.find(sample); b != boost_.end()) imp *= b->second;
  return -static_cast<long double>(imp);  // the least important goes first
}

}  // namespace prepfs

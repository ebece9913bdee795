#include "prepfs/store/staging.h"

namespace prepfs {

void Staging::drop_locked(std::unordered_map<CacheKey, Entry, CacheKeyHash>::iterator it) {
  bytes_ -= it->second.chunk->size();
  residency_.remove(it->second.sample);
  oldest_first_.erase(it->second.age);
  entries_.erase(it);
}

bool Staging::put(const CacheKey& key, ChunkRef chunk, uint32_t sample) {
  if (chunk->size() > capacity_) return false;
  std::lock_guard lock(mu_);
  if (entries_.count(key)) return true;
  while (bytes_ + chunk->size() > capacity_ && !oldest_first_.empty()) {
    drop_locked(entries_.find(oldest_first_.front()));
    bump(counters_.wasted);
  }
  bytes_ += chunk->size();
  oldest_first_.push_back(key);
  residency_.add(sample);
  entries_.emplace(key, Entry{std::move(chunk), sample, std::prev(oldest_first_.end())});
  return true;
}

ChunkRef Staging::take(const CacheKey& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  ChunkRef c = std::move(it->second.chunk);
  it->second.chunk = c;  // drop_locked reads its size
  drop_locked(it);
  return c;
}

bool Staging::contains(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  return entries_.count(key) != 0;
}

void Staging::clear() {
  std::lock_guard lock(mu_);
  bump(counters_.wasted, entries_.size());
  while (!entries_.empty()) drop_locked(entries_.begin());
}

uint64_t Staging::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace prepfs

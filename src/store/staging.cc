#include "prepfs/store/staging.h"

namespace prepfs {

void Staging::drop_locked(Entries::iterator it) {
  bytes_ -= it->second.chunk->size();
  if (it->second.by == StagedBy::render_ahead) ahead_bytes_ -= it->second.chunk->size();
  residency_.remove(it->second.sample);
  oldest_first_.erase(it->second.age);
  entries_.erase(it);
}

void Staging::count_wasted(StagedBy by) { bump(by == StagedBy::prefetch ? prefetch_.wasted : ahead_.wasted); }

bool Staging::put(const CacheKey& key, ChunkRef chunk, uint32_t sample) {
  if (chunk->size() > capacity_) return false;
  std::lock_guard lock(mu_);
  if (entries_.count(key)) return true;
  while (bytes_ + chunk->size() > capacity_ && !oldest_first_.empty()) {
    auto oldest = entries_.find(oldest_first_.front());
    count_wasted(oldest->second.by);
    drop_locked(oldest);
  }
  bytes_ += chunk->size();
  oldest_first_.push_back(key);
  residency_.add(sample);
  entries_.emplace(key, Entry{std::move(chunk), sample, StagedBy::prefetch, std::prev(oldest_first_.end())});
  return true;
}

bool Staging::fits_ahead_locked(uint64_t bytes) const {
  return bytes_ + bytes <= capacity_ && ahead_bytes_ + bytes <= ahead_capacity_;
}

bool Staging::has_room_ahead(uint64_t bytes) const {
  std::lock_guard lock(mu_);
  return fits_ahead_locked(bytes);
}

bool Staging::put_ahead(const CacheKey& key, ChunkRef chunk, uint32_t sample) {
  std::lock_guard lock(mu_);
  if (entries_.count(key)) return false;
  if (!fits_ahead_locked(chunk->size())) return false;
  bytes_ += chunk->size();
  ahead_bytes_ += chunk->size();
  oldest_first_.push_back(key);
  residency_.add(sample);
  entries_.emplace(key, Entry{std::move(chunk), sample, StagedBy::render_ahead, std::prev(oldest_first_.end())});
  return true;
}

ChunkRef Staging::take(const CacheKey& key, TakenBy by) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  if (by == TakenBy::read) bump(it->second.by == StagedBy::prefetch ? prefetch_.hits : ahead_.used);
  ChunkRef c = it->second.chunk;
  drop_locked(it);
  return c;
}

ChunkRef Staging::peek(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.chunk;
}

void Staging::drop(const CacheKey& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  count_wasted(it->second.by);
  drop_locked(it);
}

bool Staging::contains(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  return entries_.count(key) != 0;
}

void Staging::clear() {
  std::lock_guard lock(mu_);
  while (!entries_.empty()) {
    count_wasted(entries_.begin()->second.by);
    drop_locked(entries_.begin());
  }
}

void Staging::drop_sample(uint32_t sample) {
  std::lock_guard lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.sample == sample) {
      count_wasted(it->second.by);
      drop_locked(it);
    }
    it = next;
  }
}

uint64_t Staging::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

uint64_t Staging::ahead_bytes() const {
  std::lock_guard lock(mu_);
  return ahead_bytes_;
}

}  // namespace prepfs

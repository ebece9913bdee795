#include "prepfs/cache/recent_fills.h"

namespace prepfs {

ChunkRef RecentFills::get(const CacheKey& key) {
  auto it = pos_.find(key);
  if (it == pos_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second;
}

bool RecentFills::put(const CacheKey& key, ChunkRef chunk, uint64_t room, std::vector<ChunkRef>* dropped) {
  if (chunk->size() > room) return false;
  if (ChunkRef old = erase(key)) dropped->push_back(std::move(old));
  shrink_to(room - chunk->size(), dropped);
  bytes_ += chunk->size();
  order_.emplace_front(key, std::move(chunk));
  pos_[key] = order_.begin();
  return true;
}

void RecentFills::shrink_to(uint64_t room, std::vector<ChunkRef>* dropped) {
  while (bytes_ > room && !order_.empty()) {
    Entry& oldest = order_.back();
    bytes_ -= oldest.second->size();
    pos_.erase(oldest.first);
    dropped->push_back(std::move(oldest.second));
    order_.pop_back();
  }
}

ChunkRef RecentFills::erase(const CacheKey& key) {
  auto it = pos_.find(key);
  if (it == pos_.end()) return nullptr;
  ChunkRef c = std::move(it->second->second);
  bytes_ -= c->size();
  order_.erase(it->second);
  pos_.erase(it);
  return c;
}

void RecentFills::clear(std::vector<ChunkRef>* dropped) { shrink_to(0, dropped); }

}  // namespace prepfs

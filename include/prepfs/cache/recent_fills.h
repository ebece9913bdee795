// The last fills that no tier admitted, kept at hand for the next read requests of the same file:
// the kernel asks for one chunk in several requests, and without them each request would fetch
// or render the chunk again. Least recently used first out, by bytes. Not thread-safe: the RAM
// tier's lock covers it, because its room is the RAM budget the tier's entries leave free.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/key.h"

namespace prepfs {

class RecentFills {
 public:
  ChunkRef get(const CacheKey& key);  // null when absent; a hit is the newest again
  // Keeps chunk within `room` bytes, dropping the oldest entries as needed (into *dropped, for
  // the caller to free outside its lock). False, and nothing dropped, when chunk alone is larger.
  bool put(const CacheKey& key, ChunkRef chunk, uint64_t room, std::vector<ChunkRef>* dropped);
  // Drops the oldest entries until at most `room` bytes remain.
  void shrink_to(uint64_t room, std::vector<ChunkRef>* dropped);
  ChunkRef erase(const CacheKey& key);  // the dropped chunk, if any
  void clear(std::vector<ChunkRef>* dropped);

  uint64_t bytes() const { return bytes_; }
  size_t entries() const { return pos_.size(); }

 private:
  using Entry = std::pair<CacheKey, ChunkRef>;
  std::list<Entry> order_;  // front = newest
  std::unordered_map<CacheKey, std::list<Entry>::iterator, CacheKeyHash> pos_;
  uint64_t bytes_ = 0;
};

}  // namespace prepfs

// How one cache entry lies in the shared tier. memcached items hold at most -I bytes each, so an
// entry is one head item and, when it is larger, more items holding the rest in order:
//
//   prepfs1:<32 hex digits of the key>:<form letter>     SsdEntryHeader (64 B, the SSD tier's own:
//                                                         magic, version, key, length, XXH3 of
//                                                         the payload), SharedSplit (16 B), then
//                                                         the payload's first bytes
//   prepfs1:<key>:<form>:<i>  (i = 1 .. pieces-1)         the next piece_bytes of the payload
//   prepfs1:<key>:<form>:lease                           a fill in progress (see SharedTier)
//
// The key in the name is the content key (source version, form, pipeline hash, variant, chunk),
// so a changed file or pipeline is another name and never a stale hit. Whatever is read back is
// checked as an SSD entry is: header checksum, key, form, length, payload checksum. A value that
// fails (corrupt, truncated, foreign, pieces from two writers) is a miss.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/key.h"
#include "prepfs/cache/ssd_entry.h"
#include "prepfs/common/forms.h"

namespace prepfs {

struct SharedSplit {
  uint32_t piece_bytes;  // payload bytes of each piece after the head
  uint32_t pieces;       // items in all, the head included
  uint64_t check;        // XXH3 of the two fields above and the header's checksum
};
static_assert(sizeof(SharedSplit) == 16);

inline constexpr size_t kSharedHeadBytes = sizeof(SsdEntryHeader) + sizeof(SharedSplit);
// Entries larger than this are not shared (a bound for what a corrupt header could ask for).
inline constexpr uint64_t kMaxSharedEntry = 1ull << 30;

std::string shared_head_key(const CacheKey& key, Form form);
std::string shared_piece_key(const CacheKey& key, Form form, uint32_t piece);
std::string shared_lease_key(const CacheKey& key, Form form);

// The items of one entry, ready to store: the head (copied, it carries the header) and views of
// the payload for the other pieces. max_value_bytes: the most one item may hold (> head bytes).
struct SharedItems {
  std::string head;
  std::vector<std::span<const char>> rest;  // piece i+1
};
SharedItems split_entry(const CacheKey& key, Form form, const Chunk& payload, uint64_t max_value_bytes);

// Reassembles an entry from its head and, when there are more pieces, their values. Call
// start() with the head, then add() each further piece, then finish().
class SharedAssembly {
 public:
  SharedAssembly(const CacheKey& key, Form form) : key_(key), form_(form) {}
  // nullptr when the head is a valid head of this key and form; else why not.
  const char* start(std::span<const char> head);
  uint32_t pieces() const { return split_.pieces; }
  // Piece i (1 .. pieces-1); a piece of the wrong size makes finish() fail.
  void add(uint32_t piece, std::span<const char> value);
  // The entry, or nullptr with *why set (a missing piece, a checksum mismatch).
  ChunkRef finish(const char** why);

 private:
  CacheKey key_;
  Form form_;
  SsdEntryHeader header_{};
  SharedSplit split_{};
  std::shared_ptr<Chunk> chunk_;
  uint64_t head_bytes_ = 0;  // payload bytes the head carried
  uint32_t filled_ = 0;      // pieces placed, the head included
  bool bad_piece_ = false;
};

}  // namespace prepfs

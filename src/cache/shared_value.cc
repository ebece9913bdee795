#include "prepfs/cache/shared_value.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace prepfs {
namespace {

constexpr char kFormLetter[kForms] = {'r', 'd', 'a'};
constexpr std::string_view kPrefix = "prepfs1:";  // the layout's version: a new layout is a new name

uint64_t split_check(const SharedSplit& s, const SsdEntryHeader& h) {
  const uint64_t fields[3] = {s.piece_bytes, s.pieces, h.header_checksum};
  return XXH3_64bits(fields, sizeof fields);
}

// Bytes of payload the head carries, and in each later piece.
uint64_t head_payload(uint64_t max_value_bytes) { return max_value_bytes - kSharedHeadBytes; }

}  // namespace

std::string shared_head_key(const CacheKey& key, Form form) {
  std::string k(kPrefix);
  k += key.hex();
  k += ':';
  k += kFormLetter[index_of(form)];
  return k;
}

std::string shared_piece_key(const CacheKey& key, Form form, uint32_t piece) {
  return shared_head_key(key, form) + ":" + std::to_string(piece);
}

std::string shared_lease_key(const CacheKey& key, Form form) { return shared_head_key(key, form) + ":lease"; }

SharedItems split_entry(const CacheKey& key, Form form, const Chunk& payload, uint64_t max_value_bytes) {
  const uint64_t first = std::min<uint64_t>(payload.size(), head_payload(max_value_bytes));
  const uint64_t piece = max_value_bytes;
  SharedItems items;
  const SsdEntryHeader h = make_entry_header(key, payload, form);
  SharedSplit split{};
  split.piece_bytes = static_cast<uint32_t>(piece);
  split.pieces = static_cast<uint32_t>(1 + (payload.size() - first + piece - 1) / piece);
  split.check = split_check(split, h);
  items.head.resize(kSharedHeadBytes + first);
  std::memcpy(items.head.data(), &h, sizeof h);
  std::memcpy(items.head.data() + sizeof h, &split, sizeof split);
  std::memcpy(items.head.data() + kSharedHeadBytes, payload.data(), first);
  for (uint64_t off = first; off < payload.size(); off += piece)
    items.rest.emplace_back(payload.data() + off, std::min<uint64_t>(piece, payload.size() - off));
  return items;
}

const char* SharedAssembly::start(std::span<const char> head) {
  if (head.size() < kSharedHeadBytes) return "too short for a head";
  std::memcpy(&header_, head.data(), sizeof header_);
  std::memcpy(&split_, head.data() + sizeof header_, sizeof split_);
  if (const char* why = check_entry_header(key_, header_)) return why;  // the payload comes later
  if (header_.form != static_cast<uint8_t>(form_)) return "form mismatch";
  if (header_.length > kMaxSharedEntry) return "entry too large";
  if (split_.check != split_check(split_, header_)) return "split checksum mismatch";
  const uint64_t first = head_bytes_ = head.size() - kSharedHeadBytes;
  if (first > header_.length || split_.pieces == 0 || split_.piece_bytes == 0) return "bad split";
  const uint64_t rest = header_.length - first;
  if (split_.pieces != 1 + (rest + split_.piece_bytes - 1) / split_.piece_bytes) return "bad split";
  chunk_ = Chunk::allocate(header_.length);
  std::memcpy(chunk_->mutable_data(), head.data() + kSharedHeadBytes, first);
  filled_ = 1;
  return nullptr;
}

void SharedAssembly::add(uint32_t piece, std::span<const char> value) {
  if (!chunk_ || piece == 0 || piece >= split_.pieces) return;
  // Piece i starts after the head's bytes and i-1 full pieces.
  const uint64_t off = head_bytes_ + uint64_t(piece - 1) * split_.piece_bytes;
  const uint64_t want = std::min<uint64_t>(split_.piece_bytes, header_.length - off);
  if (value.size() != want) {
    bad_piece_ = true;
    return;
  }
  std::memcpy(chunk_->mutable_data() + off, value.data(), want);
  filled_++;
}

ChunkRef SharedAssembly::finish(const char** why) {
  *why = nullptr;
  if (!chunk_)
    *why = "no head";
  else if (bad_piece_)
    *why = "a piece of the wrong size";
  else if (filled_ != split_.pieces)
    *why = "a piece is missing";
  else
    *why = check_entry(key_, header_, chunk_->data(), chunk_->size());
  if (*why) return nullptr;
  return std::move(chunk_);
}

}  // namespace prepfs

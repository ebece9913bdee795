// The SSD tier's file format: one self-describing file per cached chunk (format version, key,
// length, xxHash3 of the payload, header checksum), so a torn write, a flipped bit or a file
// renamed onto another key's name is detected on read and becomes a miss, never wrong bytes.
// And the file names: chunks/XX/<32 hex digits of the key>-<form letter>, with ".spare" after the
// copies the tier keeps of what RAM holds (evicted first; see SsdTier).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/key.h"
#include "prepfs/common/forms.h"

namespace prepfs {

struct SsdEntryHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint64_t key_hi;
  uint64_t key_lo;
  uint64_t length;
  uint64_t checksum;  // XXH3_64 of the payload, seeded with key_lo
  uint8_t form;
  uint8_t reserved[7];
  uint64_t header_checksum;  // XXH3_64 of the bytes above
};
static_assert(sizeof(SsdEntryHeader) == 64);

inline constexpr uint32_t kSsdFormatVersion = 1;

SsdEntryHeader make_entry_header(const CacheKey& key, const Chunk& payload, Form form);

// Checks an entry file's header and payload against the key it was looked up under. nullptr when
// valid, else the reason.
const char* check_entry(const CacheKey& key, const SsdEntryHeader& header, const char* payload, size_t size);
// The header alone (magic, version, header checksum, key), for a payload that is read later.
const char* check_entry_header(const CacheKey& key, const SsdEntryHeader& header);

struct EntryName {
  CacheKey key;
  Form form = Form::raw;
  bool spare = false;
};

std::string entry_name(const CacheKey& key, Form form, bool spare);
std::optional<EntryName> parse_entry_name(std::string_view name);
// The fan-out directory of a key under chunks/: its first two hex digits (256 directories).
std::string fanout_name(const CacheKey& key);
bool is_fanout_name(std::string_view name);

}  // namespace prepfs

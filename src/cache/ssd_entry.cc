#include "prepfs/cache/ssd_entry.h"

#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace prepfs {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'E', 'P', 'F', 'S', 'C', '\0'};
constexpr char kFormLetter[kForms] = {'r', 'd', 'a'};
constexpr std::string_view kSpareSuffix = ".spare";
constexpr size_t kHexDigits = 32;

uint64_t header_checksum(const SsdEntryHeader& h) { return XXH3_64bits(&h, offsetof(SsdEntryHeader, header_checksum)); }

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

SsdEntryHeader make_entry_header(const CacheKey& key, const Chunk& payload, Form form) {
  SsdEntryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kSsdFormatVersion;
  h.header_size = sizeof h;
  h.key_hi = key.hi;
  h.key_lo = key.lo;
  h.length = payload.size();
  h.checksum = XXH3_64bits_withSeed(payload.data(), payload.size(), key.lo);
  h.form = static_cast<uint8_t>(form);
  h.header_checksum = header_checksum(h);
  return h;
}

const char* check_entry_header(const CacheKey& key, const SsdEntryHeader& h) {
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return "bad magic";
  if (h.version != kSsdFormatVersion || h.header_size != sizeof h) return "unknown format version";
  if (h.header_checksum != header_checksum(h)) return "header checksum mismatch";
  if (h.key_hi != key.hi || h.key_lo != key.lo) return "key mismatch";
  return nullptr;
}

const char* check_entry(const CacheKey& key, const SsdEntryHeader& h, const char* payload, size_t size) {
  if (const char* why = check_entry_header(key, h)) return why;
  if (h.length != size) return "length mismatch";
  if (XXH3_64bits_withSeed(payload, size, key.lo) != h.checksum) return "checksum mismatch";
  return nullptr;
}

std::string entry_name(const CacheKey& key, Form form, bool spare) {
  std::string name = key.hex() + "-" + kFormLetter[index_of(form)];
  if (spare) name += kSpareSuffix;
  return name;
}

std::optional<EntryName> parse_entry_name(std::string_view name) {
  EntryName out;
  if (name.ends_with(kSpareSuffix)) {
    out.spare = true;
    name.remove_suffix(kSpareSuffix.size());
  }
  if (name.size() != kHexDigits + 2 || name[kHexDigits] != '-') return std::nullopt;
  if (!CacheKey::from_hex(name.substr(0, kHexDigits), &out.key)) return std::nullopt;
  const char* letter = std::find(kFormLetter, kFormLetter + kForms, name[kHexDigits + 1]);
  if (letter == kFormLetter + kForms) return std::nullopt;
  out.form = static_cast<Form>(letter - kFormLetter);
  return out;
}

std::string fanout_name(const CacheKey& key) { return key.hex().substr(0, 2); }

bool is_fanout_name(std::string_view name) { return name.size() == 2 && is_hex(name[0]) && is_hex(name[1]); }

}  // namespace prepfs

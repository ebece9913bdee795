#include "prepfs/cache/key.h"

#include <xxhash.h>

#include <cstring>

namespace prepfs {

std::string CacheKey::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; i++) {
    s[static_cast<size_t>(15 - i)] = digits[(hi >> (4 * i)) & 0xf];
    s[static_cast<size_t>(31 - i)] = digits[(lo >> (4 * i)) & 0xf];
  }
  return s;
}

bool CacheKey::from_hex(std::string_view s, CacheKey* out) {
  if (s.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; i++) {
    char c = s[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    parts[i / 16] = (parts[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  out->hi = parts[0];
  out->lo = parts[1];
  return true;
}

CacheKey make_key(const KeyFields& f) {
  // Fixed-width fields first, then the path: no two field combinations serialise alike. One
  // contiguous buffer and one-shot hashing: this runs on every request.
  struct __attribute__((packed)) Fixed {
    uint64_t size;
    int64_t mtime_ns;
    uint64_t identity;
    uint64_t pipeline_hash;
    uint64_t chunk;
    uint64_t chunk_size;
    uint32_t variant;
    uint8_t form;
  } fixed{f.version.size, f.version.mtime_ns, f.version.identity, f.pipeline_hash,
          f.chunk,        f.chunk_size,       f.variant,          static_cast<uint8_t>(f.form)};
  char stack[sizeof(Fixed) + 240];
  std::string heap;
  char* buf = stack;
  const size_t n = sizeof fixed + f.path.size();
  if (n > sizeof stack) {
    heap.resize(n);
    buf = heap.data();
  }
  std::memcpy(buf, &fixed, sizeof fixed);
  std::memcpy(buf + sizeof fixed, f.path.data(), f.path.size());
  XXH128_hash_t h = XXH3_128bits(buf, n);
  return CacheKey{h.high64, h.low64};
}

}  // namespace prepfs

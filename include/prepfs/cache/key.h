// Cache keys. A key names one chunk of one form of one version of one file; every field that
// changes the bytes is hashed in, so a changed source file or pipeline can never hit old entries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "prepfs/common/forms.h"
#include "prepfs/source/source.h"

namespace prepfs {

struct CacheKey {
  uint64_t hi = 0, lo = 0;
  bool operator==(const CacheKey&) const = default;
  auto operator<=>(const CacheKey&) const = default;  // an arbitrary total order, for ranked sets
  std::string hex() const;                            // 32 lowercase hex digits
  static bool from_hex(std::string_view s, CacheKey* out);
};

struct KeyFields {
  std::string_view path;  // relative source path
  FileVersion version;    // the source version the bytes derive from
  Form form = Form::raw;
  uint64_t pipeline_hash = 0;  // 0 for raw
  uint32_t variant = 0;        // augmented variant number
  uint64_t chunk = 0;          // chunk index within the form's bytes
  uint64_t chunk_size = 0;     // the chunking the index refers to (raw; 0 for whole files)
};

CacheKey make_key(const KeyFields& f);

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const noexcept {
    return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull));
  }
};

}  // namespace prepfs

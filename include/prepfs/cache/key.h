// Cache keys. A key names one chunk of one form of one version of one file; every field that
// changes the bytes is hashed in, so a changed source file or pipeline can never hit old entries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace prepfs {

enum class Form : uint8_t { raw = 0, decoded = 1, augmented = 2 };
constexpr int kFormCount = 3;
const char* form_name(Form f);

struct CacheKey {
  uint64_t hi = 0, lo = 0;
  bool operator==(const CacheKey&) const = default;
  std::string hex() const;                  // 32 lowercase hex digits
  static bool from_hex(std::string_view s, CacheKey* out);
};

struct KeyFields {
  std::string_view path;       // relative source path
  uint64_t size = 0;           // source version: size + mtime (or ETag hash for object stores)
  int64_t mtime_ns = 0;
  Form form = Form::raw;
  uint64_t pipeline_hash = 0;  // 0 for raw
  uint32_t variant = 0;        // augmented variant number
  uint64_t chunk = 0;          // chunk index within the form's bytes
};

CacheKey make_key(const KeyFields& f);

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const noexcept { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
};

}  // namespace prepfs

#include "prepfs/transform/error.h"

#include <cerrno>

namespace prepfs::transform {

DecodeError::DecodeError(Kind kind, const std::string& msg)
    : TransformError(EIO, std::string(to_string(kind)) + ": " + msg), kind_(kind) {}

const char* to_string(DecodeError::Kind kind) noexcept {
  switch (kind) {
    case DecodeError::Kind::kNotJpeg: return "not a JPEG";
    case DecodeError::Kind::kCorrupt: return "corrupt JPEG";
    case DecodeError::Kind::kTruncated: return "truncated JPEG";
    case DecodeError::Kind::kTooLarge: return "JPEG too large";
    case DecodeError::Kind::kUnsupported: return "unsupported JPEG";
  }
  return "JPEG error";
}

SpecError::SpecError(std::size_t pos, const std::string& msg)
    : TransformError(EINVAL, "pipeline spec, at offset " + std::to_string(pos) + ": " + msg), pos_(pos) {}

}  // namespace prepfs::transform

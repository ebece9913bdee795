// Errors raised by the transform layer.
//
// Every error carries an errno so that the FUSE adaptor can turn it into a reply without
// knowing about images. Image problems (corrupt, truncated, too large, unsupported) are all
// EIO: to a reader of decoded/ or augmented/ they mean the same thing, "this file cannot be
// produced", while raw/ still serves the bytes. The Kind says why, for the one log line.
// Spec errors are EINVAL: they come from a bad option, not from a bad file.
//
// TransformError is a prepfs::Error, so errno_of() maps it like any other core error.
#pragma once

#include <stdexcept>
#include <string>

#include "prepfs/common/error.h"

namespace prepfs::transform {

class TransformError : public prepfs::Error {
 public:
  TransformError(int err, const std::string& msg) : prepfs::Error(err, msg) {}
};

class DecodeError : public TransformError {
 public:
  enum class Kind {
    kNotJpeg,      // no SOI marker: not an image we handle
    kCorrupt,      // libjpeg (or our header parser) rejected the data
    kTruncated,    // the data ended before the image did (PIL: "image file is truncated")
    kTooLarge,     // the header claims more pixels than max_pixels; nothing was allocated
    kUnsupported,  // valid JPEG that PIL would not open either (12-bit, 2 components, ...)
  };
  DecodeError(Kind kind, const std::string& msg);
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

const char* to_string(DecodeError::Kind kind) noexcept;

class SpecError : public TransformError {
 public:
  // pos: byte offset in the spec text where the problem was found.
  SpecError(std::size_t pos, const std::string& msg);
  std::size_t pos() const noexcept { return pos_; }

 private:
  std::size_t pos_;
};

}  // namespace prepfs::transform

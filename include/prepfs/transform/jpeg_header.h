// JPEG recognition and a cheap header parse, without libjpeg and without decoding.
//
// Why: stat() on decoded/ and augmented/ must return the exact output size before anything is
// decoded, and that size depends only on the image dimensions. The dimensions are in the SOFn
// segment, which sits in the first few KB of almost every file (after APPn segments such as
// EXIF, which may hold a thumbnail and make it a few tens of KB). The parser works on a prefix
// and says how many bytes it needs when the prefix is too short, so the caller can read a small
// block first and a larger one only when needed.
//
// Recognition is by content, as PIL does it: the file starts with FF D8 FF.
// The parser walks the marker segments up to the first SOS, so it also rejects the files that PIL
// and libjpeg would refuse for header reasons (12-bit samples, 2 components, no SOF, lossless or
// hierarchical processes that libjpeg-turbo 2.1 cannot decode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace prepfs::transform {

// Bytes worth reading first: enough for the SOF of typical camera files (JFIF/EXIF headers).
inline constexpr std::size_t kHeaderProbeBytes = 16 * 1024;

// True when the data starts with the JPEG SOI marker followed by another marker (FF D8 FF).
bool looks_like_jpeg(std::span<const std::uint8_t> prefix) noexcept;

struct JpegInfo {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  int components = 0;        // 1 (gray), 3 (YCbCr or RGB), 4 (CMYK or YCCK)
  bool progressive = false;  // SOF2 / SOF10
  std::uint8_t sof_marker = 0;
  std::size_t sos_offset = 0;  // offset of the first SOS marker (FF DA)

  std::uint64_t pixels() const { return std::uint64_t{width} * height; }
};

struct HeaderResult {
  enum class Status {
    kOk,
    kNeedMore,     // the prefix ended before the first SOS; read at least need_bytes
    kNotJpeg,      // no SOI
    kCorrupt,      // malformed segment structure
    kUnsupported,  // well-formed, but not an image PIL + libjpeg-turbo 2.1 would decode
  };
  Status status = Status::kCorrupt;
  JpegInfo info;
  std::size_t need_bytes = 0;  // for kNeedMore: a prefix of at least this length is needed
  std::string message;         // for the error statuses
};

// Parses the header segments of a JPEG prefix. `complete` says the prefix is the whole file, in
// which case running out of data is kCorrupt rather than kNeedMore.
HeaderResult parse_jpeg_header(std::span<const std::uint8_t> prefix, bool complete) noexcept;

// Convenience for callers that hold the whole file: kOk -> info, anything else -> DecodeError
// (EIO) with the matching kind. Also refuses images with more than max_pixels pixels.
JpegInfo read_jpeg_info(std::span<const std::uint8_t> data, std::uint64_t max_pixels);

}  // namespace prepfs::transform

// Marker walk over a JPEG prefix; see jpeg_header.h for why it exists.
//
// The walk mirrors PIL's JpegImagePlugin._open (skip junk bytes between segments, treat FF FF
// as fill, stop at the first SOS) so that "PIL can open it" and "we can stat it" agree, and it
// applies libjpeg's own structural checks on SOFn (segment length, sampling factors).
#include "prepfs/transform/jpeg_header.h"

#include "prepfs/transform/error.h"

#include <string>

namespace prepfs::transform {
namespace {

using Status = HeaderResult::Status;

HeaderResult fail(Status s, std::string msg) {
  HeaderResult r;
  r.status = s;
  r.message = std::move(msg);
  return r;
}

HeaderResult need(std::size_t n, bool complete) {
  if (complete) return fail(Status::kCorrupt, "JPEG header ends prematurely");
  HeaderResult r;
  r.status = Status::kNeedMore;
  r.need_bytes = n;
  return r;
}

unsigned be16(const std::uint8_t* p) { return (unsigned{p[0]} << 8) | p[1]; }

bool is_sof(unsigned m) {
  // C4 (DHT), C8 (JPG) and CC (DAC) share the range but are not frame headers.
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// SOF0/1 (baseline/extended Huffman), SOF2 (progressive), SOF9/10 (arithmetic) are what
// libjpeg-turbo 2.1 decodes; lossless (C3, CB) and hierarchical (C5-C7, CD-CF) are not.
bool sof_decodable(unsigned m) { return m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xC9 || m == 0xCA; }

}  // namespace

bool looks_like_jpeg(std::span<const std::uint8_t> p) noexcept {
  return p.size() >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
}

HeaderResult parse_jpeg_header(std::span<const std::uint8_t> p, bool complete) noexcept {
  if (p.size() < 3) {
    if (complete) return fail(Status::kNotJpeg, "too short for a JPEG");
    return need(3, false);
  }
  if (!looks_like_jpeg(p)) return fail(Status::kNotJpeg, "no JPEG SOI marker");

  JpegInfo info;
  bool have_sof = false;
  std::size_t pos = 2;
  const std::size_t n = p.size();
  try {
    for (;;) {
      // Find the next marker: PIL skips non-FF junk, FF FF is fill, FF 00 is stuffing.
      if (pos >= n) return need(pos + 4, complete);
      if (p[pos] != 0xFF) {
        ++pos;
        continue;
      }
      if (pos + 1 >= n) return need(pos + 4, complete);
      const unsigned m = p[pos + 1];
      if (m == 0xFF) {
        ++pos;
        continue;
      }
      if (m == 0x00) {
        pos += 2;
        continue;
      }
      const std::size_t marker_at = pos;
      pos += 2;
      // Stand-alone markers (no length field).
      if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;
      if (m == 0xD9) return fail(Status::kCorrupt, "EOI before the first scan");

      if (pos + 2 > n) return need(pos + 2, complete);
      const unsigned len = be16(&p[pos]);
      if (len < 2) {
        // An APPn or COM segment that says it holds less than its own length field: PIL reads
        // nothing of it and libjpeg skips nothing, both go on right after the field (and decode
        // the file). Any other segment this short is one neither can use.
        if ((m >= 0xE0 && m <= 0xEF) || m == 0xFE) {
          pos += 2;
          continue;
        }
        return fail(Status::kCorrupt, "marker segment with length < 2");
      }

      if (m == 0xDA) {  // SOS: the header is over
        if (!have_sof) return fail(Status::kCorrupt, "scan before any frame header");
        info.sos_offset = marker_at;
        HeaderResult r;
        r.status = Status::kOk;
        r.info = info;
        return r;
      }
      if (is_sof(m)) {
        if (have_sof) return fail(Status::kCorrupt, "more than one frame header");
        if (pos + len > n) return need(pos + len + 4, complete);
        const std::uint8_t* s = &p[pos + 2];
        if (len < 8) return fail(Status::kCorrupt, "frame header too short");
        const unsigned bits = s[0];
        const unsigned height = be16(s + 1);
        const unsigned width = be16(s + 3);
        const unsigned ncomp = s[5];
        if (bits != 8) {
          return fail(Status::kUnsupported, "cannot handle " + std::to_string(bits) + "-bit samples");
        }
        if (ncomp != 1 && ncomp != 3 && ncomp != 4) {
          return fail(Status::kUnsupported, "cannot handle " + std::to_string(ncomp) + "-component images");
        }
        if (len != 8 + 3 * ncomp) return fail(Status::kCorrupt, "bad frame header length");
        for (unsigned c = 0; c < ncomp; ++c) {
          const unsigned hv = s[6 + 3 * c + 1];
          const unsigned h = hv >> 4;
          const unsigned v = hv & 15;
          if (h < 1 || h > 4 || v < 1 || v > 4) {
            return fail(Status::kCorrupt, "bad sampling factors");
          }
        }
        if (width == 0 || height == 0) {
          // Height 0 means "see DNL marker", which libjpeg does not support.
          return fail(Status::kUnsupported, "zero image dimension (DNL)");
        }
        if (!sof_decodable(m)) {
          return fail(Status::kUnsupported, "lossless or hierarchical JPEG");
        }
        info.width = width;
        info.height = height;
        info.components = static_cast<int>(ncomp);
        info.progressive = (m == 0xC2 || m == 0xCA);
        info.sof_marker = static_cast<std::uint8_t>(m);
        have_sof = true;
      }
      // Skip the segment body; its bytes are not needed, only the next marker.
      pos += len;
    }
  } catch (...) {
    // std::to_string may throw bad_alloc; this function promises noexcept.
    return fail(Status::kCorrupt, "out of memory while parsing the header");
  }
}

JpegInfo read_jpeg_info(std::span<const std::uint8_t> data, std::uint64_t max_pixels) {
  HeaderResult r = parse_jpeg_header(data, /*complete=*/true);
  using K = DecodeError::Kind;
  switch (r.status) {
    case Status::kOk: break;
    case Status::kNotJpeg: throw DecodeError(K::kNotJpeg, r.message);
    case Status::kUnsupported: throw DecodeError(K::kUnsupported, r.message);
    case Status::kNeedMore:  // cannot happen with complete=true
    case Status::kCorrupt: throw DecodeError(K::kCorrupt, r.message);
  }
  if (r.info.pixels() > max_pixels) {
    throw DecodeError(K::kTooLarge, "image of " + std::to_string(r.info.width) + "x" + std::to_string(r.info.height) +
                                        " pixels exceeds max_pixels=" + std::to_string(max_pixels));
  }
  return r.info;
}

}  // namespace prepfs::transform

// JPEG decoding with libjpeg-turbo, to RGB pixels equal to PIL's
// Image.open(f).convert('RGB') byte for byte (for the full-size decode).
//
// What makes the bytes equal (Pillow 9.4, src/libImaging/JpegDecode.c + Convert.c):
//  - the same library (Debian's libjpeg62-turbo) with its defaults, which Pillow keeps outside
//    draft mode: JDCT_ISLOW IDCT, fancy upsampling, block smoothing;
//  - grayscale: replicated into R, G and B (PIL's L -> RGB);
//  - 4 components: libjpeg outputs CMYK (converting YCCK itself); Pillow assumes Adobe polarity
//    and inverts every channel ("CMYK;I"), then cmyk2rgb: nk = 255 - k,
//    channel = nk - round(c * nk / 255) with Pillow's MULDIV255 rounding;
//  - strictness: PIL raises on hard libjpeg errors, including bad markers after the image, and
//    when the data ends before the image does ("image file is truncated"), but ignores libjpeg
//    warnings (corrupt entropy data is decoded as libjpeg repairs it) and data that ends among
//    the markers after the image (even without EOI). We do the same, so a file is an error here
//    iff it is one for PIL.
//
// Safety: libjpeg's default error handler calls exit(); ours longjmps back and throws
// DecodeError (EIO). The pixel limit is checked on the header before libjpeg allocates anything,
// and the number of progressive scans is capped so a hostile file cannot stall a decoder thread.
//
// Fast paths (see augment.h): DCT-domain downscaling (scale_eighths < 8) and decoding only a
// rectangle (jpeg_crop_scanline + jpeg_skip_scanlines).
#pragma once

#include "prepfs/transform/image.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>

namespace prepfs::transform {

inline constexpr std::uint64_t kDefaultMaxPixels = 100'000'000;
// libjpeg-turbo 3 caps progressive scans the same way (TJPARAM_SCANLIMIT); real encoders use
// about 10, so 500 only refuses hostile files (each scan is a pass over all coefficients).
inline constexpr int kDefaultMaxScans = 500;

struct DecodeLimits {
  std::uint64_t max_pixels = kDefaultMaxPixels;
  int max_scans = kDefaultMaxScans;
  // Bytes libjpeg may allocate (its max_memory_to_use; 0: no cap). What grows with the image is
  // the coefficient buffers of progressive and multi-scan files; a file that needs more fails
  // with kTooLarge before allocating them.
  std::uint64_t max_memory = 0;
};

struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// Pixels of a rectangle of the (possibly scaled) frame: image(0, 0) is frame pixel (x, y).
struct DecodedRegion {
  Image image;
  int x = 0;
  int y = 0;
  int frame_width = 0;  // the scaled frame, i.e. ceil(width * scale / 8)
  int frame_height = 0;
};

// One decode of one JPEG held in memory. Not copyable; use it from one thread at a time (any
// number of readers may run in parallel: there is no shared state).
class JpegReader {
 public:
  // Reads the headers. Throws DecodeError: kNotJpeg, kCorrupt, kTruncated, kUnsupported,
  // kTooLarge (more than limits.max_pixels pixels; checked before any allocation).
  explicit JpegReader(std::span<const std::uint8_t> data, const DecodeLimits& limits = {});
  ~JpegReader();
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  int width() const noexcept;
  int height() const noexcept;
  int components() const noexcept;

  // Frame size when decoded at scale_eighths / 8 (1..8); libjpeg rounds up.
  std::pair<int, int> scaled_size(int scale_eighths) const;

  // Decodes (once per reader). scale_eighths = 8 and no region is the exact, PIL-equal path.
  // With a region (in scaled-frame coordinates, clipped to the frame) the result covers at
  // least that region; it may be larger because libjpeg works in whole iMCUs. Pixels inside the
  // region are those of a full decode at the same scale: a margin of one iMCU is decoded around
  // it so that fancy upsampling sees the same neighbours (tested in test_jpeg_decode_pil).
  // The rest of the file is still read (rows above and below the region entropy-decoded only,
  // markers checked to EOI), so a region decode fails iff the full decode fails. With
  // read_rest = false the decode stops after the region's last row: the same pixels, but damage
  // below the region goes unseen (for input known to decode to its end).
  DecodedRegion decode(int scale_eighths = 8, std::optional<Rect> region = std::nullopt, bool read_rest = true);

  // The exact full-size decode, written straight into rgb (at least width*height*3 bytes,
  // rows packed): lets the decoded/ view write pixels into its output file buffer, after the
  // PPM/NPY header, without an intermediate image. Same once-per-reader rule.
  void decode_into(std::span<std::uint8_t> rgb);

  struct State;  // libjpeg state; opaque (defined in jpeg_decode.cc)

 private:
  DecodedRegion decode_impl(int scale_eighths, std::optional<Rect> region, std::span<std::uint8_t> dest,
                            bool read_rest = true);
  std::unique_ptr<State> s_;
};

// Exact decode of a whole JPEG: equal to PIL's Image.open(f).convert('RGB').
Image decode_jpeg(std::span<const std::uint8_t> data, const DecodeLimits& limits = {});

}  // namespace prepfs::transform

// Decoder behaviour that needs no Python: colour handling invariants, partial and scaled decodes,
// and above all bad input (truncated, corrupted, hostile headers): always a DecodeError, never a
// crash, an abort or an allocation the header did not justify. Byte equality with PIL is in
// test_reference.cc. Run these under the asan/ubsan build too.
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_decode.h"
#include "prepfs/transform/jpeg_header.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

namespace prepfs::transform {
namespace {

using testing::encode_jpeg;
using testing::EncodeParams;
using testing::synthetic_samples;
using Bytes = std::vector<std::uint8_t>;

Bytes make(int w, int h, int comps, EncodeParams p = {}) {
  return encode_jpeg(synthetic_samples(w, h, comps, 3), w, h, comps, p);
}

// Decodes, expecting failure; returns the kind.
DecodeError::Kind expect_error(const Bytes& data, const DecodeLimits& limits = {}) {
  try {
    const Image img = decode_jpeg(data, limits);
    ADD_FAILURE() << "decoded " << img.width << "x" << img.height << " from bad input";
  } catch (const DecodeError& e) {
    EXPECT_EQ(e.err(), EIO);
    return e.kind();
  }
  return DecodeError::Kind::kNotJpeg;
}

TEST(JpegDecode, DecodesCloseToTheEncodedPixels) {
  const Bytes src = synthetic_samples(96, 64, 3, 3);
  EncodeParams p;
  p.quality = 98;
  p.h_samp = 1;
  p.v_samp = 1;
  const Image img = decode_jpeg(encode_jpeg(src, 96, 64, 3, p));
  ASSERT_EQ(img.width, 96);
  ASSERT_EQ(img.height, 64);
  double mad = 0;
  for (std::size_t i = 0; i < src.size(); ++i) mad += std::abs(int(src[i]) - int(img.pixels[i]));
  EXPECT_LT(mad / static_cast<double>(src.size()), 4.0);
}

TEST(JpegDecode, GrayBecomesThreeEqualChannels) {
  const Image img = decode_jpeg(make(83, 61, 1));
  ASSERT_EQ(img.pixels.size(), 83u * 61 * 3);
  bool varied = false;
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) {
    ASSERT_EQ(img.pixels[i], img.pixels[i + 1]);
    ASSERT_EQ(img.pixels[i], img.pixels[i + 2]);
    varied |= img.pixels[i] != img.pixels[0];
  }
  EXPECT_TRUE(varied);
}

// PIL reads 4-component JPEGs as Adobe-inverted CMYK: stored samples (c, m, y, k) mean ink
// 255 - value, so a pixel stored as (255, 255, 255, 255) is white and (0, 0, 0, 0) is black.
TEST(JpegDecode, CmykUsesAdobeInvertedPolarity) {
  for (const char* space : {"cmyk", "ycck"}) {
    EncodeParams p;
    p.jpeg_space = space;
    p.quality = 100;
    Bytes white(16 * 16 * 4, 255), black(16 * 16 * 4, 0);
    const Image w = decode_jpeg(encode_jpeg(white, 16, 16, 4, p));
    const Image b = decode_jpeg(encode_jpeg(black, 16, 16, 4, p));
    EXPECT_GE(w.pixels[0], 253) << space;
    EXPECT_LE(b.pixels[0], 2) << space;
  }
}

TEST(JpegDecode, ScaledDecodeHasLibjpegsRoundedUpSize) {
  const Bytes j = make(101, 37, 3);
  for (int m : {1, 2, 4, 8}) {
    JpegReader rd(j);
    const auto [sw, sh] = rd.scaled_size(m);
    EXPECT_EQ(sw, (101 * m + 7) / 8);
    EXPECT_EQ(sh, (37 * m + 7) / 8);
    const DecodedRegion d = rd.decode(m);
    EXPECT_EQ(d.image.width, sw);
    EXPECT_EQ(d.image.height, sh);
    EXPECT_EQ(d.frame_width, sw);
  }
}

// Partial decodes (crop_scanline + skip_scanlines, with the iMCU margin) equal the full decode
// inside the requested region, for every sampling layout, progressive or not, and when scaled.
TEST(JpegDecode, RegionDecodeEqualsFullDecodeInsideTheRegion) {
  std::mt19937 gen(11);
  struct Layout {
    int comps, h, v;
    bool progressive;
    const char* space;
  };
  for (const Layout l : {Layout{3, 2, 2, false, "auto"}, Layout{3, 2, 1, false, "auto"}, Layout{3, 1, 2, true, "auto"},
                         Layout{3, 1, 1, false, "auto"}, Layout{3, 2, 2, true, "auto"}, Layout{1, 1, 1, false, "auto"},
                         Layout{4, 2, 2, false, "ycck"}}) {
    EncodeParams p;
    p.h_samp = l.h;
    p.v_samp = l.v;
    p.progressive = l.progressive;
    p.jpeg_space = l.space;
    const Bytes j = make(237, 181, l.comps, p);
    for (int m : {8, 4, 2}) {
      JpegReader full_rd(j);
      const Image full = full_rd.decode(m).image;
      for (int k = 0; k < 25; ++k) {
        const int w = std::uniform_int_distribution<int>(1, full.width)(gen);
        const int h = std::uniform_int_distribution<int>(1, full.height)(gen);
        const int x = std::uniform_int_distribution<int>(0, full.width - w)(gen);
        const int y = std::uniform_int_distribution<int>(0, full.height - h)(gen);
        JpegReader rd(j);
        const DecodedRegion d = rd.decode(m, Rect{x, y, w, h});
        ASSERT_LE(d.x, x);
        ASSERT_LE(d.y, y);
        ASSERT_GE(d.x + d.image.width, x + w);
        ASSERT_GE(d.y + d.image.height, y + h);
        for (int r = 0; r < h; ++r) {
          ASSERT_EQ(0, std::memcmp(full.row(y + r) + 3 * x, d.image.row(y + r - d.y) + 3 * (x - d.x),
                                   static_cast<std::size_t>(3 * w)))
              << "layout comps=" << l.comps << " " << l.h << "x" << l.v << (l.progressive ? " progressive" : "")
              << " scale " << m << "/8 region " << x << "," << y << " " << w << "x" << h << " row " << r;
        }
      }
    }
  }
}

// Every cut into the data before the EOI marker is an error. (A file that lacks only its EOI is
// one for PIL iff libjpeg still needed bytes of the scan data; the reference tests hold that
// case against PIL with the *_no_eoi fixtures.)
TEST(JpegDecode, EveryTruncationBeforeTheEoiIsAnError) {
  for (bool progressive : {false, true}) {
    for (int comps : {1, 3, 4}) {
      EncodeParams p;
      p.progressive = progressive;
      const Bytes j = make(40, 24, comps, p);
      ASSERT_EQ(j[j.size() - 2], 0xFF);
      ASSERT_EQ(j[j.size() - 1], 0xD9);
      for (std::size_t len = 0; len + 2 < j.size(); ++len) {
        const Bytes cut(j.begin(), j.begin() + static_cast<std::ptrdiff_t>(len));
        const DecodeError::Kind k = expect_error(cut);
        if (len > 3) {
          EXPECT_NE(k, DecodeError::Kind::kNotJpeg) << len;
        }
        if (::testing::Test::HasFailure()) {
          FAIL() << "truncated to " << len << " of " << j.size() << " bytes, comps=" << comps
                 << (progressive ? " progressive" : "");
        }
      }
    }
  }
}

// Also when only a region is decoded: the rows below it are still read (entropy-decoded).
TEST(JpegDecode, PartialDecodeOfATruncatedFileIsAnError) {
  const Bytes j = make(200, 160, 3);
  const Bytes cut(j.begin(), j.end() - 40);
  JpegReader rd(cut);
  EXPECT_THROW(rd.decode(8, Rect{0, 0, 16, 16}), DecodeError);
  // A complete file with trailing garbage after EOI is fine (PIL ignores it too).
  Bytes trailing = j;
  trailing.insert(trailing.end(), {0x00, 0x01, 0x02});
  JpegReader rd2(trailing);
  EXPECT_NO_THROW(rd2.decode(8, Rect{0, 0, 16, 16}));
  EXPECT_NO_THROW(decode_jpeg(trailing));
}

TEST(JpegDecode, RandomCorruptionNeverCrashes) {
  std::mt19937 gen(1234);
  int errors = 0, decoded = 0;
  for (int comps : {3, 1, 4}) {
    for (bool progressive : {false, true}) {
      EncodeParams p;
      p.progressive = progressive;
      const Bytes j = make(48, 40, comps, p);
      for (int it = 0; it < 250; ++it) {
        Bytes b = j;
        const int flips = std::uniform_int_distribution<int>(1, 8)(gen);
        for (int f = 0; f < flips; ++f) {
          const std::size_t pos = std::uniform_int_distribution<std::size_t>(2, b.size() - 1)(gen);
          b[pos] = static_cast<std::uint8_t>(gen());
        }
        try {
          const Image img = decode_jpeg(b);
          // A decodable corruption has the size its header walk gives (the index sizes decoded/
          // files from that walk), whether the damage changed the header or not. JpegReader
          // refuses a file whose walk and libjpeg disagree; this is what fails if it stops.
          const HeaderResult h = parse_jpeg_header(b, true);
          ASSERT_EQ(h.status, HeaderResult::Status::kOk);
          EXPECT_EQ(img.width, h.info.width);
          EXPECT_EQ(img.height, h.info.height);
          ++decoded;
        } catch (const DecodeError& e) {
          EXPECT_EQ(e.err(), EIO);
          ++errors;
        }
        try {  // the partial path on the same bytes
          JpegReader rd(b);
          rd.decode(4, Rect{5, 5, 20, 20});
        } catch (const DecodeError&) {
        }
      }
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(decoded, 0);
}

// Patch the frame header of a valid file to claim a huge image: refused before allocation.
TEST(JpegDecode, HugeHeaderIsRefusedBeforeAllocating) {
  Bytes j = make(16, 16, 3);
  const HeaderResult r = parse_jpeg_header(j, true);
  ASSERT_EQ(r.status, HeaderResult::Status::kOk);
  std::size_t sof = 2;
  while (!(j[sof] == 0xFF && j[sof + 1] == 0xC0)) ++sof;
  j[sof + 5] = 0xFF;  // height 65280
  j[sof + 6] = 0x00;
  j[sof + 7] = 0xFF;  // width 65280
  j[sof + 8] = 0x00;
  // kTooLarge comes from the header's size, before libjpeg starts (a timing bound here said
  // nothing about allocation, and a busy machine broke it).
  EXPECT_EQ(expect_error(j), DecodeError::Kind::kTooLarge);
  // (With a limit that allowed it, libjpeg would "decode" it as PIL would without its
  // decompression-bomb check: the missing entropy data reads as zeros after a warning. That
  // is why the limit exists.)
  EXPECT_THROW(JpegReader{j}, DecodeError);  // the reader itself refuses, before decode()
}

TEST(JpegDecode, MaxPixelsIsInclusive) {
  const Bytes j = make(64, 64, 3);
  DecodeLimits l;
  l.max_pixels = 64 * 64;
  EXPECT_NO_THROW(decode_jpeg(j, l));
  l.max_pixels = 64 * 64 - 1;
  EXPECT_EQ(expect_error(j, l), DecodeError::Kind::kTooLarge);
}

// A progressive file whose first scan is repeated 600 times (libjpeg only warns about the bogus
// progression) is refused by the scan cap instead of being decoded pass after pass.
TEST(JpegDecode, ScanCapRefusesEndlessProgressiveFiles) {
  EncodeParams p;
  p.progressive = true;
  const Bytes j = make(32, 32, 3, p);
  const std::size_t sos = parse_jpeg_header(j, true).info.sos_offset;
  // The first scan runs to the next marker that is not RSTn / stuffing.
  std::size_t end = sos + 2;
  end += (std::size_t{j[end]} << 8) | j[end + 1];
  while (!(j[end] == 0xFF && j[end + 1] != 0x00 && (j[end + 1] < 0xD0 || j[end + 1] > 0xD7))) {
    ++end;
  }
  Bytes hostile(j.begin(), j.begin() + static_cast<std::ptrdiff_t>(sos));
  for (int i = 0; i < 600; ++i) {
    hostile.insert(hostile.end(), j.begin() + static_cast<std::ptrdiff_t>(sos),
                   j.begin() + static_cast<std::ptrdiff_t>(end));
  }
  hostile.insert(hostile.end(), j.begin() + static_cast<std::ptrdiff_t>(end), j.end());
  try {
    decode_jpeg(hostile);
    FAIL() << "600-scan file accepted";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("scans"), std::string::npos) << e.what();
  }
  DecodeLimits l;
  l.max_scans = 100000;
  EXPECT_NO_THROW(decode_jpeg(hostile, l));  // the cap, not the data, was the reason
}

// DecodeLimits::max_memory caps libjpeg's whole-image coefficient buffers (progressive files):
// over the cap the decode fails as too large instead of allocating them. A baseline file has no
// such buffers and decodes under the same cap.
TEST(JpegDecode, MaxMemoryCapsProgressiveCoefficientBuffers) {
  EncodeParams prog;
  prog.progressive = true;
  prog.jpeg_space = "cmyk";
  const Bytes progressive = make(512, 512, 4, prog);  // coefficients: 4 * 64 * 64 blocks * 128 B = 2 MiB
  EncodeParams base;
  base.jpeg_space = "cmyk";
  const Bytes baseline = make(512, 512, 4, base);
  DecodeLimits capped;
  capped.max_memory = 1 << 20;
  try {
    decode_jpeg(progressive, capped);
    FAIL() << "a 2 MiB coefficient buffer under a 1 MiB cap";
  } catch (const DecodeError& e) {
    EXPECT_EQ(e.kind(), DecodeError::Kind::kTooLarge) << e.what();
  }
  EXPECT_EQ(decode_jpeg(baseline, capped).pixels, decode_jpeg(baseline).pixels);
  DecodeLimits enough;
  enough.max_memory = 8 << 20;
  EXPECT_EQ(decode_jpeg(progressive, enough).pixels, decode_jpeg(progressive).pixels);
}

TEST(JpegDecode, NotJpegAndMisuse) {
  EXPECT_EQ(expect_error(Bytes{}), DecodeError::Kind::kNotJpeg);
  EXPECT_EQ(expect_error(Bytes{'h', 'e', 'l', 'l', 'o'}), DecodeError::Kind::kNotJpeg);
  // The reader reads the caller's bytes in place: they must outlive it (a temporary here was read
  // after it was freed, which valgrind found and ASan could not see inside libjpeg).
  const Bytes jpeg = make(8, 8, 3);
  JpegReader rd(jpeg);
  rd.decode();
  EXPECT_THROW(rd.decode(), DecodeError);
}

}  // namespace
}  // namespace prepfs::transform

// The header walk: recognition, dimensions from a prefix, and the files it must refuse.
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_header.h"
#include "prepfs/transform/render.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace prepfs::transform {
namespace {

using testing::encode_jpeg;
using testing::synthetic_samples;
using Bytes = std::vector<std::uint8_t>;
using Status = HeaderResult::Status;

// Hand-built marker streams.
Bytes segment(std::uint8_t marker, const Bytes& body) {
  Bytes s{0xFF, marker, static_cast<std::uint8_t>((body.size() + 2) >> 8),
          static_cast<std::uint8_t>((body.size() + 2) & 0xFF)};
  s.insert(s.end(), body.begin(), body.end());
  return s;
}
Bytes sof(std::uint8_t marker, int bits, int h, int w, int ncomp) {
  Bytes b{static_cast<std::uint8_t>(bits),   static_cast<std::uint8_t>(h >> 8),   static_cast<std::uint8_t>(h & 0xFF),
          static_cast<std::uint8_t>(w >> 8), static_cast<std::uint8_t>(w & 0xFF), static_cast<std::uint8_t>(ncomp)};
  for (int c = 0; c < ncomp; ++c) {
    b.push_back(static_cast<std::uint8_t>(c + 1));
    b.push_back(c == 0 ? 0x22 : 0x11);
    b.push_back(0);
  }
  return segment(marker, b);
}
Bytes stream(std::initializer_list<Bytes> parts) {
  Bytes out{0xFF, 0xD8};
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
const Bytes kSos = segment(0xDA, {1, 1, 0, 0, 63, 0});
const Bytes kApp0 = segment(0xE0, {'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0});

HeaderResult parse_all(const Bytes& b) { return parse_jpeg_header(b, true); }

TEST(JpegHeader, RecognisesJpegByContent) {
  EXPECT_TRUE(looks_like_jpeg(Bytes{0xFF, 0xD8, 0xFF}));
  EXPECT_TRUE(looks_like_jpeg(stream({kApp0})));
  EXPECT_FALSE(looks_like_jpeg(Bytes{0xFF, 0xD8}));
  EXPECT_FALSE(looks_like_jpeg(Bytes{0xFF, 0xD8, 0x00}));
  EXPECT_FALSE(looks_like_jpeg(Bytes{0x89, 'P', 'N', 'G'}));
  EXPECT_FALSE(looks_like_jpeg(Bytes{}));
  EXPECT_EQ(parse_all(Bytes{'G', 'I', 'F', '8'}).status, Status::kNotJpeg);
  EXPECT_EQ(parse_all(Bytes{}).status, Status::kNotJpeg);
}

TEST(JpegHeader, DimensionsOfRealFiles) {
  struct Case {
    int w, h, comps;
    bool progressive;
  };
  for (const Case c : {Case{123, 45, 3, false}, Case{45, 123, 3, true}, Case{1, 1, 1, false}, Case{300, 7, 4, false},
                       Case{65, 66, 1, true}}) {
    testing::EncodeParams p;
    p.progressive = c.progressive;
    const Bytes j = encode_jpeg(synthetic_samples(c.w, c.h, c.comps, 1), c.w, c.h, c.comps, p);
    const HeaderResult r = parse_all(j);
    ASSERT_EQ(r.status, Status::kOk) << r.message;
    EXPECT_EQ(r.info.width, static_cast<unsigned>(c.w));
    EXPECT_EQ(r.info.height, static_cast<unsigned>(c.h));
    EXPECT_EQ(r.info.components, c.comps);
    EXPECT_EQ(r.info.progressive, c.progressive);
    EXPECT_EQ(j[r.info.sos_offset], 0xFF);
    EXPECT_EQ(j[r.info.sos_offset + 1], 0xDA);
  }
}

// Every prefix either asks for more (and the request grows) or, once it holds the SOS, answers.
TEST(JpegHeader, PrefixesAskForMoreUntilTheFirstScan) {
  const Bytes j = encode_jpeg(synthetic_samples(40, 30, 3, 2), 40, 30, 3);
  const std::size_t sos = parse_all(j).info.sos_offset;
  for (std::size_t len = 0; len < j.size() && len < sos + 8; ++len) {
    const HeaderResult r = parse_jpeg_header(std::span(j.data(), len), false);
    if (len < sos + 4) {
      ASSERT_EQ(r.status, Status::kNeedMore) << "prefix " << len;
      EXPECT_GT(r.need_bytes, len);
      // The same prefix as a whole file is a damaged file.
      EXPECT_NE(parse_jpeg_header(std::span(j.data(), len), true).status, Status::kOk);
    } else {
      ASSERT_EQ(r.status, Status::kOk) << "prefix " << len;
      EXPECT_EQ(r.info.width, 40u);
    }
  }
}

TEST(JpegHeader, LargeAppSegmentBeforeTheFrameHeader) {
  Bytes big(60000, 0xAB);  // e.g. an EXIF block with a thumbnail
  const Bytes j = stream({kApp0, segment(0xE1, big), sof(0xC0, 8, 480, 640, 3), kSos});
  HeaderResult r = parse_jpeg_header(std::span(j.data(), kHeaderProbeBytes), false);
  ASSERT_EQ(r.status, Status::kNeedMore);
  EXPECT_GT(r.need_bytes, 60000u);
  EXPECT_LE(r.need_bytes, 60000u + 64);  // asks for the next segment head, not the file
  r = parse_jpeg_header(std::span(j.data(), r.need_bytes), false);
  ASSERT_EQ(r.status, Status::kNeedMore);  // now needs the SOF body
  r = parse_all(j);
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(r.info.width, 640u);
  EXPECT_EQ(r.info.height, 480u);
}

TEST(JpegHeader, ToleratesFillBytesAndJunkBetweenSegments) {
  Bytes j = stream({kApp0});
  j.insert(j.end(), {0xFF, 0xFF, 0xFF});  // fill before the next marker
  const Bytes s = sof(0xC2, 8, 10, 20, 1);
  j.insert(j.end(), s.begin(), s.end());
  j.insert(j.end(), {0x00, 0x12});  // junk PIL skips
  j.insert(j.end(), kSos.begin(), kSos.end());
  const HeaderResult r = parse_all(j);
  ASSERT_EQ(r.status, Status::kOk) << r.message;
  EXPECT_EQ(r.info.width, 20u);
  EXPECT_TRUE(r.info.progressive);
}

// PIL 9.4 and libjpeg both read past an APPn or COM segment whose length field is 0 or 1 (it
// holds nothing) and decode the file; the walk refused it, so decoded/ and augmented/ left out a
// file PIL opens. A frame header that short is still refused.
TEST(JpegHeader, AnAppOrCommentSegmentShorterThanItsLengthFieldHoldsNothing) {
  for (const std::uint8_t marker : {std::uint8_t(0xE0), std::uint8_t(0xE1), std::uint8_t(0xFE)})
    for (const std::uint8_t len : {std::uint8_t(0), std::uint8_t(1)}) {
      const HeaderResult r = parse_all(stream({Bytes{0xFF, marker, 0x00, len}, sof(0xC0, 8, 30, 40, 3), kSos}));
      ASSERT_EQ(r.status, Status::kOk) << int(marker) << " " << int(len) << ": " << r.message;
      EXPECT_EQ(r.info.width, 40u);
      EXPECT_EQ(r.info.height, 30u);
    }
  EXPECT_EQ(parse_all(stream({Bytes{0xFF, 0xC4, 0x00, 0x01}, sof(0xC0, 8, 30, 40, 3), kSos})).status, Status::kCorrupt);
  // And the decoder gives the same pixels as without the empty comment.
  const Bytes plain = encode_jpeg(synthetic_samples(40, 30, 3, 5), 40, 30, 3);
  Bytes with = plain;
  with.insert(with.begin() + 2, {0xFF, 0xFE, 0x00, 0x00});
  EXPECT_EQ(render_decoded(with, OutputFormat::kPpm, DecodeLimits{}), render_decoded(plain, OutputFormat::kPpm, DecodeLimits{}));
}

TEST(JpegHeader, RefusesWhatPilOrLibjpegCannotDecode) {
  EXPECT_EQ(parse_all(stream({sof(0xC0, 12, 10, 10, 3), kSos})).status, Status::kUnsupported);
  EXPECT_EQ(parse_all(stream({sof(0xC0, 8, 10, 10, 2), kSos})).status, Status::kUnsupported);
  EXPECT_EQ(parse_all(stream({sof(0xC3, 8, 10, 10, 3), kSos})).status, Status::kUnsupported);
  EXPECT_EQ(parse_all(stream({sof(0xC5, 8, 10, 10, 3), kSos})).status, Status::kUnsupported);
  EXPECT_EQ(parse_all(stream({sof(0xC0, 8, 0, 10, 3), kSos})).status, Status::kUnsupported);
  EXPECT_EQ(parse_all(stream({sof(0xC0, 8, 10, 0, 3), kSos})).status, Status::kUnsupported);
  // Arithmetic coding is fine (libjpeg-turbo decodes it).
  EXPECT_EQ(parse_all(stream({sof(0xC9, 8, 10, 10, 3), kSos})).status, Status::kOk);
}

TEST(JpegHeader, RefusesMalformedStructure) {
  EXPECT_EQ(parse_all(stream({kApp0, kSos})).status, Status::kCorrupt);  // no frame
  EXPECT_EQ(parse_all(stream({sof(0xC0, 8, 9, 9, 1), sof(0xC0, 8, 9, 9, 1), kSos})).status, Status::kCorrupt);
  EXPECT_EQ(parse_all(stream({Bytes{0xFF, 0xD9}, sof(0xC0, 8, 9, 9, 1), kSos})).status, Status::kCorrupt);
  EXPECT_EQ(parse_all(stream({Bytes{0xFF, 0xE0, 0x00, 0x01}})).status, Status::kCorrupt);
  Bytes bad_len = sof(0xC0, 8, 9, 9, 3);
  bad_len[3] += 3;  // length no longer 8 + 3 * ncomp
  bad_len.insert(bad_len.end(), {0, 0, 0});
  EXPECT_EQ(parse_all(stream({bad_len, kSos})).status, Status::kCorrupt);
  Bytes bad_samp = sof(0xC0, 8, 9, 9, 1);
  bad_samp[4 + 6 + 1] = 0x50;  // h = 5
  EXPECT_EQ(parse_all(stream({bad_samp, kSos})).status, Status::kCorrupt);
  // Truncated inside the frame header.
  const Bytes cut = stream({sof(0xC0, 8, 9, 9, 3)});
  EXPECT_EQ(parse_jpeg_header(std::span(cut.data(), cut.size() - 3), true).status, Status::kCorrupt);
}

TEST(JpegHeader, ReadInfoEnforcesThePixelLimitAndMapsErrors) {
  const Bytes j = stream({sof(0xC0, 8, 60000, 60000, 3), kSos});
  try {
    read_jpeg_info(j, 100'000'000);
    FAIL() << "3.6 GP accepted";
  } catch (const DecodeError& e) {
    EXPECT_EQ(e.kind(), DecodeError::Kind::kTooLarge);
    EXPECT_EQ(e.err(), EIO);
  }
  EXPECT_EQ(read_jpeg_info(j, 3'600'000'000ULL).width, 60000u);
  EXPECT_EQ(read_jpeg_info(stream({sof(0xC0, 8, 10, 10, 3), kSos}), 100).width, 10u);
  EXPECT_THROW(read_jpeg_info(stream({sof(0xC0, 8, 10, 10, 3), kSos}), 99), DecodeError);
  try {
    read_jpeg_info(Bytes{1, 2, 3, 4}, 100);
    FAIL();
  } catch (const DecodeError& e) {
    EXPECT_EQ(e.kind(), DecodeError::Kind::kNotJpeg);
  }
}

}  // namespace
}  // namespace prepfs::transform

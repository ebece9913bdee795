// The view-level interface: sizes from the header equal the bytes produced.
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_decode.h"
#include "prepfs/transform/render.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace prepfs::transform {
namespace {

using Bytes = std::vector<std::uint8_t>;

TEST(Render, DecodedBytesAreTheEncodedDecodeAndSizesComeFromTheHeader) {
  for (int comps : {1, 3, 4}) {
    const Bytes j = testing::encode_jpeg(testing::synthetic_samples(77, 51, comps, 4), 77, 51, comps);
    const JpegInfo info = read_jpeg_info(j, kDefaultMaxPixels);
    for (OutputFormat f : {OutputFormat::kPpm, OutputFormat::kNpy}) {
      const Bytes out = render_decoded(j, f);
      EXPECT_EQ(out, encode(f, decode_jpeg(j).view()));
      EXPECT_EQ(out.size(), decoded_file_size(info, f));
      Bytes small(out.size() - 1);
      EXPECT_THROW(render_decoded(j, f, small), std::length_error);
    }
  }
}

TEST(Render, AugmentedSizeIsKnownBeforeDecoding) {
  const Bytes j = testing::encode_jpeg(testing::synthetic_samples(300, 200, 3, 4), 300, 200, 3);
  const JpegInfo info = read_jpeg_info(j, kDefaultMaxPixels);
  for (const char* spec : {kDefaultAugmentSpec.data(), "resize(100);hflip()"}) {
    const PipelineSpec s = PipelineSpec::parse(spec);
    for (OutputFormat f : {OutputFormat::kPpm, OutputFormat::kNpy}) {
      Rng rng = Rng::for_variant(3, "p", 9);
      EXPECT_EQ(render_augmented(j, s, rng, f).size(), augmented_file_size(info, s, f));
    }
  }
}

TEST(Render, BadInputThrowsDecodeError) {
  Bytes j = testing::encode_jpeg(testing::synthetic_samples(30, 20, 3, 4), 30, 20, 3);
  j.resize(j.size() - 10);
  Bytes out(10000);
  EXPECT_THROW(render_decoded(j, OutputFormat::kPpm, out), DecodeError);
  EXPECT_THROW(render_decoded(Bytes{}, OutputFormat::kNpy), DecodeError);
}

}  // namespace
}  // namespace prepfs::transform

// Pipeline execution: reproducibility of variants, output sizes, the exactness of crop_decode,
// and what "statistically equivalent" means for the DCT-scaling fast path (see augment.h).
#include "prepfs/transform/augment.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/ops.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace prepfs::transform {
namespace {

using testing::encode_jpeg;
using testing::EncodeParams;
using testing::synthetic_samples;
using Bytes = std::vector<std::uint8_t>;

Bytes make(int w, int h, int comps = 3, EncodeParams p = {}) {
  return encode_jpeg(synthetic_samples(w, h, comps, 9), w, h, comps, p);
}

Image run(const Bytes& j, const PipelineSpec& s, std::uint64_t variant, const FastPaths& f = {}) {
  Rng rng = Rng::for_variant(99, "a/b.jpg", variant);
  AugmentOptions o;
  o.fast = f;
  return augment_jpeg(j, s, rng, o);
}

TEST(Augment, VariantsAreReproducibleAndDiffer) {
  const Bytes j = make(320, 240);
  const PipelineSpec s = PipelineSpec::parse(kDefaultAugmentSpec);
  const Image a = run(j, s, 0), b = run(j, s, 0), c = run(j, s, 1);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_NE(a.pixels, c.pixels);
  EXPECT_EQ(a.width, 224);
  EXPECT_EQ(a.height, 224);
}

// rrc with a ratio range the image cannot meet narrowed the crop to zero rows: every path must
// still crop one pixel and resize it (found by fuzz_options; CropSampler.FallbackNever...).
TEST(Augment, AnUnreachableRatioStillCropsAPixel) {
  const PipelineSpec s = PipelineSpec::parse("rrc(8,0.08,1,4,4)");
  for (const Bytes& j : {make(1, 1), make(7, 1), make(3, 2)}) {
    for (const FastPaths& f : {FastPaths{}, FastPaths{true, false, 2.0}, FastPaths{true, true, 2.0}}) {
      const Image img = run(j, s, 0, f);
      EXPECT_EQ(img.width, 8);
      EXPECT_EQ(img.height, 8);
    }
  }
}

TEST(Augment, ExactPathIsDecodeThenOps) {
  const Bytes j = make(300, 200);
  for (const char* spec :
       {kDefaultAugmentSpec.data(), "resize(256);center_crop(224)", "center_crop(64x48);hflip(1)", "resize(50x20)"}) {
    const PipelineSpec s = PipelineSpec::parse(spec);
    Rng r1 = Rng::for_variant(1, "x", 3), r2 = Rng::for_variant(1, "x", 3);
    const Image via_pipeline = augment_jpeg(j, s, r1);
    const Image by_hand = apply_ops(decode_jpeg(j), s.ops(), r2);
    EXPECT_EQ(via_pipeline.pixels, by_hand.pixels) << spec;
  }
}

TEST(Augment, OutputSizeIsTheSpecsPrediction) {
  for (auto [w, h] : {std::pair{300, 200}, {64, 480}, {17, 9}, {1, 1}}) {
    const Bytes j = make(w, h);
    for (const char* spec : {kDefaultAugmentSpec.data(), "resize(256);center_crop(224)", "resize(100)",
                             "center_crop(5x300);hflip()", "rrc(32x64)"}) {
      const PipelineSpec s = PipelineSpec::parse(spec);
      for (const FastPaths f : {FastPaths{}, FastPaths{true, true, 2.0}}) {
        const Image out = run(j, s, 5, f);
        EXPECT_EQ((Size{out.width, out.height}), s.output_size(w, h)) << spec << " on " << w << "x" << h;
        EXPECT_EQ(out.pixels.size(), std::size_t(out.width) * out.height * 3);
      }
    }
  }
}

TEST(Augment, HflipProbabilityOneFlipsAndZeroDoesNot) {
  const Bytes j = make(40, 30);
  const Image plain = run(j, PipelineSpec::parse("center_crop(20)"), 0);
  Image flipped = plain;
  hflip(flipped);
  EXPECT_EQ(run(j, PipelineSpec::parse("center_crop(20);hflip(1)"), 0).pixels, flipped.pixels);
  EXPECT_EQ(run(j, PipelineSpec::parse("center_crop(20);hflip(0)"), 0).pixels, plain.pixels);
  // p = 0.5 flips about half of the variants.
  int flips = 0;
  const PipelineSpec half = PipelineSpec::parse("center_crop(20);hflip(0.5)");
  for (std::uint64_t k = 0; k < 400; ++k) flips += run(j, half, k).pixels == flipped.pixels;
  EXPECT_GT(flips, 150);
  EXPECT_LT(flips, 250);
}

// The ops read a borrowed view (a cache entry) exactly as they read an image of their own, and
// leave the view's pixels alone.
TEST(Augment, OpsOnAViewEqualOpsOnACopy) {
  const Image parent = testing::synthetic_image(310, 207, 4);
  const ImageView v = parent.view().sub(3, 2, 300, 200);
  const Image before = copy_image(v);
  for (const char* spec : {kDefaultAugmentSpec.data(), "resize(256);center_crop(224)", "center_crop(64x48);hflip(1)",
                           "resize(50x20)", "resize(200)", "hflip(1)", "hflip(0);rrc(32)"}) {
    const PipelineSpec s = PipelineSpec::parse(spec);
    for (std::uint64_t k = 0; k < 4; ++k) {
      Rng r1 = Rng::for_variant(5, "v", k), r2 = Rng::for_variant(5, "v", k);
      const Image from_view = apply_ops(v, s.ops(), r1);
      const Image from_copy = apply_ops(copy_image(v), s.ops(), r2);
      EXPECT_EQ(from_view.width, from_copy.width) << spec;
      EXPECT_EQ(from_view.pixels, from_copy.pixels) << spec << " variant " << k;
    }
  }
  EXPECT_EQ(copy_image(v).pixels, before.pixels);
  Rng rng(1);
  EXPECT_EQ(apply_ops(v, {}, rng).pixels, before.pixels);
}

// crop_decode keeps the pixels exact, for every first op it applies to.
TEST(Augment, CropDecodeIsExact) {
  for (const auto& j : {make(333, 251), make(250, 330, 1), make(160, 120, 4)}) {
    for (const char* spec :
         {kDefaultAugmentSpec.data(), "center_crop(100x90)", "center_crop(400);hflip()", "rrc(50,0.01,0.05)"}) {
      const PipelineSpec s = PipelineSpec::parse(spec);
      for (std::uint64_t k = 0; k < 20; ++k) {
        EXPECT_EQ(run(j, s, k).pixels, run(j, s, k, FastPaths{true, false, 2.0}).pixels) << spec << " variant " << k;
      }
    }
  }
}

// stop_below_crop (set by the store only for bytes it has decoded to their end once:
// store/verified_files.h) gives the very pixels crop_decode gives, with or without DCT scaling,
// on baseline and progressive files.
TEST(Augment, StoppingBelowTheCropGivesTheSamePixels) {
  EncodeParams progressive;
  progressive.progressive = true;
  for (const auto& j : {make(333, 251), make(250, 330, 1), make(160, 120, 4), make(500, 375, 3, progressive)}) {
    for (const char* spec : {kDefaultAugmentSpec.data(), "rrc(50,0.01,0.05)", "rrc(64,0.3,1);hflip(0.5)"}) {
      const PipelineSpec s = PipelineSpec::parse(spec);
      for (std::uint64_t k = 0; k < 20; ++k) {
        for (bool dct : {false, true}) {
          EXPECT_EQ(run(j, s, k, FastPaths{true, dct, 2.0}).pixels, run(j, s, k, FastPaths{true, dct, 2.0, true}).pixels)
              << spec << " variant " << k << (dct ? " dct" : "");
        }
      }
    }
  }
}

// Why it is only for verified bytes: a file cut short below the crop fails crop_decode, as it
// fails a full decode, but passes when the read stops at the crop.
TEST(Augment, StoppingBelowTheCropMissesDamageBelowIt) {
  const Bytes whole = make(333, 251);
  const Bytes cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() * 6 / 10));
  const PipelineSpec s = PipelineSpec::parse("rrc(32,0.01,0.05)");  // small crops, often near the top
  int passed = 0;
  for (std::uint64_t k = 0; k < 40; ++k) {
    EXPECT_THROW(run(cut, s, k, FastPaths{true, false, 2.0}), DecodeError) << "variant " << k;
    try {
      run(cut, s, k, FastPaths{true, false, 2.0, true});
      ++passed;
    } catch (const DecodeError&) {  // a crop reaching into the missing rows
    }
  }
  EXPECT_GT(passed, 0);
}

// DCT scaling changes pixels; "statistically equivalent" (augment.h) is checked as: identical
// geometry and flip for the same draws (so a per-pixel comparison is meaningful), a mean absolute
// difference over all outputs of at most 0.5 levels, no single output above 2 levels, and
// per-output mean colour within 0.5 levels (no brightness or colour shift).
TEST(Augment, DctScalingIsStatisticallyEquivalent) {
  const Bytes big = make(1600, 1200);
  const Bytes mid = make(800, 600, 3, [] {
    EncodeParams p;
    p.progressive = true;
    return p;
  }());
  double sum_mad = 0, worst = 0, worst_mean_shift = 0;
  int n = 0, scaled = 0;
  for (const Bytes* j : {&big, &mid}) {
    for (const char* spec : {kDefaultAugmentSpec.data(), "resize(256);center_crop(224)"}) {
      const PipelineSpec s = PipelineSpec::parse(spec);
      for (std::uint64_t k = 0; k < 60; ++k) {
        const Image exact = run(*j, s, k);
        const Image fast = run(*j, s, k, FastPaths{true, true, 2.0});
        ASSERT_EQ(fast.width, exact.width);
        const double mad = testing::mean_abs_diff(exact, fast);
        scaled += mad > 0;
        sum_mad += mad;
        worst = std::max(worst, mad);
        for (int c = 0; c < 3; ++c) {
          double me = 0, mf = 0;
          for (std::size_t p = static_cast<std::size_t>(c); p < exact.pixels.size(); p += 3) {
            me += exact.pixels[p];
            mf += fast.pixels[p];
          }
          const double shift = std::abs(me - mf) / (exact.pixels.size() / 3.0);
          worst_mean_shift = std::max(worst_mean_shift, shift);
        }
        ++n;
      }
    }
  }
  std::printf(
      "dct_scale vs exact over %d outputs (%d used a scaled decode): mean MAD %.3f, "
      "worst MAD %.3f, worst mean-colour shift %.3f levels\n",
      n, scaled, sum_mad / n, worst, worst_mean_shift);
  EXPECT_GT(scaled, n / 4);  // the fast path really ran
  EXPECT_LE(sum_mad / n, 0.5);
  EXPECT_LE(worst, 2.0);
  EXPECT_LE(worst_mean_shift, 0.5);
}

TEST(Augment, PipelineKeyCoversSpecAndFastPaths) {
  const PipelineSpec a = PipelineSpec::parse(kDefaultAugmentSpec);
  const PipelineSpec b = PipelineSpec::parse("rrc(224)");
  EXPECT_EQ(pipeline_key(a, {}), pipeline_key(PipelineSpec::parse("rrc(224);hflip()"), {}));
  EXPECT_NE(pipeline_key(a, {}), pipeline_key(b, {}));
  // crop_decode gives the same bytes (CropDecodeIsExact), so it shares the cache entries.
  EXPECT_EQ(pipeline_key(a, {}), pipeline_key(a, FastPaths{true, false, 2.0}));
  EXPECT_NE(pipeline_key(a, {}), pipeline_key(a, FastPaths{false, true, 2.0}));
  EXPECT_NE(pipeline_key(a, FastPaths{false, true, 2.0}), pipeline_key(a, FastPaths{false, true, 3.0}));
  EXPECT_NE(pipeline_key(a, {}), a.hash());  // distinct domains
}

TEST(Augment, HugeIntermediateImagesAreRefused) {
  const Bytes thin = make(8, 4000);
  try {
    run(thin, PipelineSpec::parse("resize(16384);center_crop(224)"), 0);
    FAIL() << "16384 x 8192000 intermediate accepted";
  } catch (const DecodeError& e) {
    EXPECT_EQ(e.kind(), DecodeError::Kind::kTooLarge);
  }
}

TEST(Augment, BadInputIsADecodeError) {
  const PipelineSpec s = PipelineSpec::parse(kDefaultAugmentSpec);
  Bytes j = make(100, 80);
  j.resize(j.size() / 2);
  for (const FastPaths f : {FastPaths{}, FastPaths{true, true, 2.0}}) {
    EXPECT_THROW(run(j, s, 0, f), DecodeError);
    EXPECT_THROW(run(Bytes{1, 2, 3}, s, 0, f), DecodeError);
  }
}

}  // namespace
}  // namespace prepfs::transform

// Resampling on tiny images whose Pillow results are worked out by hand in the comments from
// Pillow's definition (triangle filter, support widened by the scale, 22-bit weights, +0.5
// rounding). Byte equality with PIL on real images is in test_reference.cc.
#include "prepfs/transform/resample.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

namespace prepfs::transform {
namespace {

// A width x 1 image with R = values, G = values / 2, B = 255 - values.
Image row_image(const std::vector<int>& v) {
  Image img(static_cast<int>(v.size()), 1);
  for (std::size_t i = 0; i < v.size(); ++i) {
    img.pixels[3 * i] = static_cast<std::uint8_t>(v[i]);
    img.pixels[3 * i + 1] = static_cast<std::uint8_t>(v[i] / 2);
    img.pixels[3 * i + 2] = static_cast<std::uint8_t>(255 - v[i]);
  }
  return img;
}
Image column_image(const std::vector<int>& v) {
  Image img(1, static_cast<int>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    img.pixels[3 * i] = static_cast<std::uint8_t>(v[i]);
    img.pixels[3 * i + 1] = static_cast<std::uint8_t>(v[i] / 2);
    img.pixels[3 * i + 2] = static_cast<std::uint8_t>(255 - v[i]);
  }
  return img;
}
std::vector<int> red(const Image& img) {
  std::vector<int> r;
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) r.push_back(img.pixels[i]);
  return r;
}

// 2 -> 1: scale 2, support 2, centre 1.0; taps x=0,1 with triangle(-0.25) = triangle(0.25)
// = 0.75, normalised 1/2 each. (10 + 21) / 2 = 15.5 rounds up to 16 (sum starts at +0.5).
TEST(Resample, HalvingTwoPixelsRoundsHalfUp) {
  EXPECT_EQ(red(resize_bilinear(row_image({10, 21}).view(), 1, 1)), std::vector<int>{16});
  EXPECT_EQ(red(resize_bilinear(column_image({10, 21}).view(), 1, 1)), std::vector<int>{16});
}

// 4 -> 2: output 0 centred at 1.0 reads x = 0, 1, 2 with weights .75, .75, .25 (sum 1.75) =
// 3/7, 3/7, 1/7: 0*3/7 + 70*3/7 + 140/7 = 50. Output 1 centred at 3.0 reads x = 1, 2, 3 with
// 1/7, 3/7, 3/7: 10 + 60 + 90 = 160. Antialiasing: a plain 2-tap bilinear would give 35, 175.
TEST(Resample, DownscaleWidensTheTriangle) {
  EXPECT_EQ(red(resize_bilinear(row_image({0, 70, 140, 210}).view(), 2, 1)), (std::vector<int>{50, 160}));
  EXPECT_EQ(red(resize_bilinear(column_image({0, 70, 140, 210}).view(), 1, 2)), (std::vector<int>{50, 160}));
}

// 2 -> 4: scale 0.5, support 1; centres 0.25, 0.75, 1.25, 1.75. Centre 0.25 has taps [0, 1):
// just p0. Centre 0.75: taps 0, 1 with .75, .25. Centre 1.25: .25, .75. Centre 1.75: p1.
// With p = (0, 200): 0, 50, 150, 200.
TEST(Resample, UpscaleInterpolatesBetweenCentres) {
  EXPECT_EQ(red(resize_bilinear(row_image({0, 200}).view(), 4, 1)), (std::vector<int>{0, 50, 150, 200}));
}

TEST(Resample, ChannelsAreIndependent) {
  const Image out = resize_bilinear(row_image({0, 70, 140, 210}).view(), 2, 1);
  // G = v / 2 = (0, 35, 70, 105): 35*3/7 + 70/7 = 25, 35/7 + 70*3/7 + 105*3/7 = 80.
  EXPECT_EQ(out.pixels[1], 25);
  EXPECT_EQ(out.pixels[4], 80);
  // B = 255 - v: 255 - 50 and 255 - 160.
  EXPECT_EQ(out.pixels[2], 205);
  EXPECT_EQ(out.pixels[5], 95);
}

// A box at scale 1 with integer edges is a plain crop: centre 1.5 has taps 1 (weight 1) and 2
// (weight 0).
TEST(Resample, IntegerBoxAtScaleOneIsACrop) {
  EXPECT_EQ(red(resize_bilinear(row_image({0, 70, 140, 210}).view(), 2, 1, BoxF{1, 0, 3, 1})),
            (std::vector<int>{70, 140}));
}

TEST(Resample, ConstantImagesStayConstant) {
  Image img(37, 23);
  std::fill(img.pixels.begin(), img.pixels.end(), 200);
  for (auto [w, h] : {std::pair{224, 224}, {5, 3}, {1, 1}, {100, 7}, {37, 1}}) {
    const Image out = resize_bilinear(img.view(), w, h);
    ASSERT_EQ(out.width, w);
    ASSERT_EQ(out.height, h);
    for (std::uint8_t v : out.pixels) ASSERT_EQ(v, 200) << w << "x" << h;
  }
}

TEST(Resample, SameSizeIsACopyAndViewsWithStrideWork) {
  const Image img = testing::synthetic_image(30, 20, 1);
  EXPECT_EQ(resize_bilinear(img.view(), 30, 20).pixels, img.pixels);
  // Resizing a sub-view equals resizing the same pixels copied out.
  const ImageView v = img.view().sub(3, 4, 17, 9);
  EXPECT_EQ(resize_bilinear(v, 11, 5).pixels, resize_bilinear(copy_image(v).view(), 11, 5).pixels);
}

TEST(Resample, RejectsEmptyAndOutOfBoundsBoxes) {
  const Image img = testing::synthetic_image(10, 10, 1);
  EXPECT_THROW(resize_bilinear(img.view(), 0, 5), std::invalid_argument);
  EXPECT_THROW(resize_bilinear(img.view(), 5, 5, BoxF{-1, 0, 5, 5}), std::invalid_argument);
  EXPECT_THROW(resize_bilinear(img.view(), 5, 5, BoxF{0, 0, 11, 5}), std::invalid_argument);
  EXPECT_THROW(resize_bilinear(img.view(), 5, 5, BoxF{5, 0, 4, 5}), std::invalid_argument);
}

// One random resize case: a crop of a random image resized by random factors (including 1-pixel
// crops and outputs, odd widths, upscales and downscales by up to 40x), sometimes with a float
// box. Reads through a sub-view so that strides and row ends are exercised.
struct RandomCase {
  Image parent;
  int x = 0, y = 0, w = 0, h = 0;  // the view of parent that is resized
  int out_w = 0, out_h = 0;
  bool use_box = false;
  BoxF box;

  ImageView src() const { return parent.view().sub(x, y, w, h); }
};

RandomCase random_case(std::mt19937& gen) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  RandomCase c;
  const int w = pick(0, 3) == 0 ? pick(1, 4) : pick(1, 700);
  const int h = pick(0, 3) == 0 ? pick(1, 4) : pick(1, 300);
  const int mx = pick(0, 5), my = pick(0, 3);  // margins of the parent around the view
  c.parent = testing::synthetic_image(w + mx + pick(0, 3), h + my + pick(0, 2), static_cast<std::uint32_t>(gen()));
  c.x = mx;
  c.y = my;
  c.w = w;
  c.h = h;
  auto out_size = [&](int in) {
    switch (pick(0, 5)) {
      case 0: return 1;
      case 1: return std::max(1, in / pick(2, 40));          // strong downscale
      case 2: return pick(1, std::min(800, 3 * in + 2));     // anything up to an upscale
      case 3: return in;                                     // this axis keeps its size
      default: return std::max(1, in * pick(50, 99) / 100);  // RandomResizedCrop-like
    }
  };
  c.out_w = out_size(w);
  c.out_h = out_size(h);
  if (pick(0, 3) == 0) {
    std::uniform_real_distribution<double> fx(0, w), fy(0, h);
    double x0 = fx(gen), x1 = fx(gen), y0 = fy(gen), y1 = fy(gen);
    c.use_box = true;
    c.box = BoxF{std::min(x0, x1), std::min(y0, y1), std::max(x0, x1), std::max(y0, y1)};
  }
  return c;
}

Image resize_case(const RandomCase& c, ResampleKernel k) {
  return c.use_box ? resize_bilinear(c.src(), c.out_w, c.out_h, c.box, k)
                   : resize_bilinear(c.src(), c.out_w, c.out_h, k);
}

// The SIMD kernels on every target equal the reference kernels byte for byte (and the reference
// kernels equal PIL: test_reference.cc, which also holds every target against PIL directly).
TEST(Resample, EverySimdTargetEqualsTheReferenceKernels) {
  std::mt19937 gen(2024);
  std::vector<RandomCase> cases;
  std::vector<Image> want;
  for (int i = 0; i < 400; ++i) {
    cases.push_back(random_case(gen));
    want.push_back(resize_case(cases.back(), ResampleKernel::kReference));
  }
  const int targets = testing::for_each_simd_target([&](const SimdTarget&) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const RandomCase& c = cases[i];
      const Image got = resize_case(c, ResampleKernel::kSimd);
      ASSERT_EQ(got.width, c.out_w);
      ASSERT_EQ(got.height, c.out_h);
      ASSERT_TRUE(got.pixels == want[i].pixels) << "case " << i << ": " << c.w << "x" << c.h << " -> " << c.out_w << "x"
                                                << c.out_h << (c.use_box ? " with a box" : "");
    }
  });
  EXPECT_GE(targets, 2);  // at least one vector target and the scalar fallback
}

// Pillow shrinks horizontally first. The passes round to 8 bits in between, so the other order
// gives other bytes: vertical-first is not an exact optimisation.
TEST(Resample, PassOrderChangesTheResult) {
  const Image img = testing::synthetic_image(300, 280, 3);
  const Image pillow = resize_bilinear(img.view(), 224, 224);
  const Image h_then_v = resize_bilinear(resize_bilinear(img.view(), 224, 280).view(), 224, 224);
  const Image v_then_h = resize_bilinear(resize_bilinear(img.view(), 300, 224).view(), 224, 224);
  EXPECT_EQ(pillow.pixels, h_then_v.pixels);
  EXPECT_NE(pillow.pixels, v_then_h.pixels);
}

}  // namespace
}  // namespace prepfs::transform

// Resampling on tiny images whose Pillow results are worked out by hand in the comments from
// Pillow's definition (triangle filter, support widened by the scale, 22-bit weights, +0.5
// rounding). Byte equality with PIL on real images is in test_reference.cc.
#include "prepfs/transform/resample.h"

#include "test_util.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace prepfs::transform

#include "prepfs/transform/ops.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>

namespace prepfs::transform {
namespace {

TEST(Ops, HflipMirrorsEachRow) {
  Image img(3, 2);
  for (std::size_t k = 0; k < img.pixels.size(); ++k) img.pixels[k] = static_cast<std::uint8_t>(k);
  hflip(img);
  // Row 0 was pixels (0,1,2) (3,4,5) (6,7,8); mirrored: (6,7,8) (3,4,5) (0,1,2).
  EXPECT_EQ(std::vector<std::uint8_t>(img.pixels.begin(), img.pixels.end()), (std::vector<std::uint8_t>{6, 7, 8, 3, 4, 5, 0, 1, 2,  //
                                                   15, 16, 17, 12, 13, 14, 9, 10, 11}));
  hflip(img);
  for (std::size_t k = 0; k < img.pixels.size(); ++k) EXPECT_EQ(img.pixels[k], k);
  Image one(1, 1);
  one.pixels = {1, 2, 3};
  hflip(one);
  EXPECT_EQ(std::vector<std::uint8_t>(one.pixels.begin(), one.pixels.end()), (std::vector<std::uint8_t>{1, 2, 3}));
}

// The SIMD mirroring (16 pixels at a time, the rest one by one) on every target, for widths
// around the vector size, against a pixel-by-pixel mirror.
TEST(Ops, HflipEqualsAPlainMirrorOnEverySimdTarget) {
  const int targets = testing::for_each_simd_target([](const SimdTarget&) {
    for (int w : {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 100, 224, 333}) {
      Image img = testing::synthetic_image(w, 3, static_cast<std::uint32_t>(w));
      Image want(w, 3);
      for (int y = 0; y < 3; ++y) {
        for (int x = 0; x < w; ++x) std::memcpy(want.row(y) + 3 * x, img.row(y) + 3 * (w - 1 - x), 3);
      }
      hflip(img);
      ASSERT_EQ(img.pixels, want.pixels) << "width " << w;
    }
  });
  EXPECT_GE(targets, 2);
}

TEST(Ops, CropPaddedCopiesInsideAndZeroFillsOutside) {
  const Image src = testing::synthetic_image(10, 8, 3);
  // Fully inside: equals the sub-view.
  const Image in = crop_padded(src.view(), CenterCrop{2, 3, 4, 5});
  EXPECT_EQ(in.pixels, copy_image(src.view().sub(3, 2, 5, 4)).pixels);
  // Extends one row above and two columns left of the source.
  const Image out = crop_padded(src.view(), CenterCrop{-1, -2, 3, 4});
  ASSERT_EQ(out.width, 4);
  ASSERT_EQ(out.height, 3);
  for (int x = 0; x < 4; ++x) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out.row(0)[3 * x + c], 0);
  }
  for (int y = 1; y < 3; ++y) {
    for (int c = 0; c < 6; ++c) EXPECT_EQ(out.row(y)[c], 0);  // columns 0, 1
    EXPECT_EQ(std::vector<std::uint8_t>(out.row(y) + 6, out.row(y) + 12),
              std::vector<std::uint8_t>(src.row(y - 1), src.row(y - 1) + 6));
  }
  // Entirely outside: all zeros.
  const Image none = crop_padded(src.view(), CenterCrop{20, 20, 2, 2});
  for (auto v : none.pixels) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace prepfs::transform

// Crop geometry: hand-worked draws through torchvision's algorithm, the fallback, Python
// rounding, and distribution checks against the acceptance model integrated numerically here
// (independently of the sampler). Replays of torchvision's own recorded draws are in
// test_reference.cc.
#include "prepfs/transform/crop_sampler.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace prepfs::transform {
namespace {

using testing::ScriptedSource;
using D = ScriptedSource::Draw;

D u(double v) { return D{false, v, 0}; }
D i(std::int64_t v) { return D{true, 0, v}; }

// 500x375, area 187500; scale draw 0.5 -> 93750; log-ratio draw 0 -> aspect 1;
// w = h = round(sqrt(93750)) = round(306.19) = 306; then i, j from randint.
TEST(CropSampler, AcceptsOnTheFirstAttempt) {
  ScriptedSource src({u(0.5), u(0.0), i(10), i(20)});
  EXPECT_EQ(sample_rrc_box(500, 375, RrcParams{}, src), (CropBox{10, 20, 306, 306}));
  EXPECT_TRUE(src.all_consumed());
  EXPECT_EQ(src.error(), "");
}

// 375x500 (portrait): scale .99, aspect 4/3 -> w = round(sqrt(185625 * 4/3)) = 497 > 375:
// rejected. Then scale .25 (46875), aspect 1 -> 217 x 217 (sqrt = 216.51).
TEST(CropSampler, RejectsBoxesWiderThanTheImage) {
  ScriptedSource src({u(0.99), u(std::log(4.0f / 3.0f)), u(0.25), u(0.0), i(3), i(4)});
  EXPECT_EQ(sample_rrc_box(375, 500, RrcParams{}, src), (CropBox{3, 4, 217, 217}));
  EXPECT_TRUE(src.all_consumed());
  EXPECT_EQ(src.error(), "");
}

// 10 x 1000: every attempt asks for a box about 70 px wide; after 10 rejections the fallback:
// in_ratio 0.01 < 3/4, so w = 10, h = round(10 / 0.75) = round(13.33) = 13, centred:
// i = (1000 - 13) // 2 = 493.
TEST(CropSampler, FallsBackToACentralCropNarrowedToTheRatioRange) {
  std::vector<D> draws;
  for (int k = 0; k < 10; ++k) {
    draws.push_back(u(0.5));
    draws.push_back(u(0.0));
  }
  ScriptedSource tall(draws);
  EXPECT_EQ(sample_rrc_box(10, 1000, RrcParams{}, tall), (CropBox{493, 0, 13, 10}));
  EXPECT_TRUE(tall.all_consumed());
  ScriptedSource wide(draws);  // 1000 x 10: h = 10, w = round(10 * 4/3) = 13
  EXPECT_EQ(sample_rrc_box(1000, 10, RrcParams{}, wide), (CropBox{0, 493, 10, 13}));
  // In-range aspect: the whole image.
  ScriptedSource square({u(1.0),    u(0.2876), u(1.0),    u(0.2876), u(1.0),    u(0.2876), u(1.0),
                         u(0.2876), u(1.0),    u(0.2876), u(1.0),    u(0.2876), u(1.0),    u(0.2876),
                         u(1.0),    u(0.2876), u(1.0),    u(0.2876), u(1.0),    u(0.2876)});
  EXPECT_EQ(sample_rrc_box(100, 100, RrcParams{}, square), (CropBox{0, 0, 100, 100}));
}

// A ratio range far from the image's: narrowing rounds the short side to 0 (torchvision would
// hand PIL an empty crop). Found by fuzz_options: augment=rrc(224,0.08,1,4,4) on a 1x1 image.
TEST(CropSampler, FallbackNeverReturnsAnEmptyBox) {
  Rng rng(1);
  EXPECT_EQ(sample_rrc_box(1, 1, RrcParams{0.08, 1, 4, 4}, rng), (CropBox{0, 0, 1, 1}));
  EXPECT_EQ(sample_rrc_box(7, 1, RrcParams{0.08, 1, 0.01, 0.01}, rng), (CropBox{0, 3, 1, 1}));
  EXPECT_EQ(sample_rrc_box(1, 9, RrcParams{0.08, 1, 50, 60}, rng), (CropBox{4, 0, 1, 1}));
}

TEST(CropSampler, PythonRoundingHalvesToEven) {
  EXPECT_EQ(round_half_even(0.5), 0.0);
  EXPECT_EQ(round_half_even(1.5), 2.0);
  EXPECT_EQ(round_half_even(2.5), 2.0);
  EXPECT_EQ(round_half_even(2.5000001), 3.0);
  EXPECT_EQ(round_half_even(13.333), 13.0);
}

// Acceptance model for one attempt, ignoring rounding: scale s ~ U(a, b), log-ratio
// t ~ U(log 3/4, log 4/3); accepted iff s * A * r <= W^2 and s * A / r <= H^2.
// E[s | accepted] and the fallback probability by a fine midpoint grid.
struct Model {
  double mean_scale_accepted;
  double p_accept;
  double mean_log_ratio_accepted;
};
Model integrate(int w, int h) {
  const double area = double(w) * h;
  const double t0 = std::log(0.75), t1 = std::log(4.0 / 3.0);
  const int n = 2000;
  double acc = 0, s_acc = 0, t_acc = 0;
  for (int a = 0; a < n; ++a) {
    const double s = 0.08 + (1.0 - 0.08) * (a + 0.5) / n;
    for (int b = 0; b < n; ++b) {
      const double t = t0 + (t1 - t0) * (b + 0.5) / n;
      const double r = std::exp(t);
      if (s * area * r <= double(w) * w && s * area / r <= double(h) * h) {
        acc += 1;
        s_acc += s;
        t_acc += t;
      }
    }
  }
  return Model{s_acc / acc, acc / (double(n) * n), t_acc / acc};
}

TEST(CropSampler, DistributionMatchesTheAcceptanceModel) {
  for (auto [w, h] : {std::pair{500, 375}, {375, 500}, {224, 224}, {1000, 300}}) {
    const Model m = integrate(w, h);
    const double p_fallback = std::pow(1 - m.p_accept, 10);
    // Fallback box: the whole image if its ratio is in range, else narrowed to the range.
    const double in_ratio = double(w) / h;
    double fw = w, fh = h;
    if (in_ratio < 0.75) fh = std::nearbyint(w / 0.75);
    if (in_ratio > 4.0 / 3.0) fw = std::nearbyint(h * 4.0 / 3.0);
    const double want_scale = (1 - p_fallback) * m.mean_scale_accepted + p_fallback * fw * fh / (double(w) * h);
    const double want_logr = (1 - p_fallback) * m.mean_log_ratio_accepted + p_fallback * std::log(fw / fh);

    const int n = 20000;
    double sum_scale = 0, sum_logr = 0, sum_pos_y = 0, sum_pos_x = 0;
    int npos_y = 0, npos_x = 0;
    for (int k = 0; k < n; ++k) {
      Rng rng = Rng::for_variant(7, "img.jpg", static_cast<std::uint64_t>(k + 1000 * w));
      const CropBox b = sample_rrc_box(w, h, RrcParams{}, rng);
      ASSERT_GE(b.top, 0);
      ASSERT_GE(b.left, 0);
      ASSERT_GE(b.width, 1);
      ASSERT_GE(b.height, 1);
      ASSERT_LE(b.top + b.height, h);
      ASSERT_LE(b.left + b.width, w);
      sum_scale += double(b.width) * b.height / (double(w) * h);
      sum_logr += std::log(double(b.width) / b.height);
      if (b.height < h) {
        sum_pos_y += double(b.top) / (h - b.height);
        ++npos_y;
      }
      if (b.width < w) {
        sum_pos_x += double(b.left) / (w - b.width);
        ++npos_x;
      }
    }
    // Standard errors: area fraction sd < 0.27 -> 0.002; 5 sd plus rounding bias.
    EXPECT_NEAR(sum_scale / n, want_scale, 0.012) << w << "x" << h;
    EXPECT_NEAR(sum_logr / n, want_logr, 0.01) << w << "x" << h;
    EXPECT_NEAR(sum_pos_y / npos_y, 0.5, 0.02) << w << "x" << h;
    EXPECT_NEAR(sum_pos_x / npos_x, 0.5, 0.02) << w << "x" << h;
  }
}

// torchvision F.center_crop: round((size - crop) / 2) with Python rounding, zero padding first
// when the crop is larger (left/top get the smaller half).
TEST(CropSampler, CenterCropGeometry) {
  auto g = center_crop_geometry(500, 375, 224, 224);  // (375-224)/2 = 75.5 -> 76
  EXPECT_EQ(g.top, 76);
  EXPECT_EQ(g.left, 138);
  g = center_crop_geometry(500, 374, 225, 225);  // 74.5 -> 74 (half to even)
  EXPECT_EQ(g.top, 74);
  EXPECT_EQ(g.left, 138);                       // 137.5 -> 138
  g = center_crop_geometry(100, 50, 224, 224);  // padded both ways: 62 left, 87 top
  EXPECT_EQ(g.left, -62);
  EXPECT_EQ(g.top, -87);
  g = center_crop_geometry(300, 100, 224, 224);  // only the height is padded
  EXPECT_EQ(g.top, -62);
  EXPECT_EQ(g.left, 38);
  g = center_crop_geometry(101, 50, 224, 100);  // pad h: (224-50)//2 = 87; w: round(0.5) = 0
  EXPECT_EQ(g.top, -87);
  EXPECT_EQ(g.left, 0);
  EXPECT_EQ(g.width, 100);
  EXPECT_EQ(g.height, 224);
}

// Resize(256): int(256 * 500 / 375) = int(341.33) = 341.
TEST(CropSampler, ResizeShorterSide) {
  EXPECT_EQ(resize_shorter_size(500, 375, 256), (Size{341, 256}));
  EXPECT_EQ(resize_shorter_size(375, 500, 256), (Size{256, 341}));
  EXPECT_EQ(resize_shorter_size(300, 300, 256), (Size{256, 256}));
  EXPECT_EQ(resize_shorter_size(1, 3, 2), (Size{2, 6}));
  EXPECT_EQ(resize_shorter_size(3, 7, 2), (Size{2, 4}));  // 4.67 truncates
}

}  // namespace
}  // namespace prepfs::transform

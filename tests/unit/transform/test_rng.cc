// The variant generator: a pure function of (seed, path, variant), uniform and unbiased.
#include "prepfs/transform/rng.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <stdexcept>

namespace prepfs::transform {
namespace {

std::vector<std::uint64_t> first(Rng r, int n) {
  std::vector<std::uint64_t> v;
  for (int k = 0; k < n; ++k) v.push_back(r.next());
  return v;
}

TEST(Rng, VariantIsAPureFunctionOfSeedPathAndIndex) {
  const auto a = first(Rng::for_variant(1, "train/n01/x.jpg", 5), 8);
  EXPECT_EQ(a, first(Rng::for_variant(1, "train/n01/x.jpg", 5), 8));
  EXPECT_NE(a, first(Rng::for_variant(1, "train/n01/x.jpg", 6), 8));
  EXPECT_NE(a, first(Rng::for_variant(2, "train/n01/x.jpg", 5), 8));
  EXPECT_NE(a, first(Rng::for_variant(1, "train/n01/y.jpg", 5), 8));
  // Seed and variant are fixed-width fields: (seed 1, variant 0) != (seed 0, variant 1).
  EXPECT_NE(first(Rng::for_variant(1, "p", 0), 4), first(Rng::for_variant(0, "p", 1), 4));
}

TEST(Rng, UniformStaysInRangeWithTheRightMean) {
  Rng r(42);
  double sum = 0;
  const int n = 200000;
  for (int k = 0; k < n; ++k) {
    const double x = r.uniform01();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    sum += x;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.004);  // sd of the mean: 0.29 / sqrt(n) = 0.00065
  for (int k = 0; k < 1000; ++k) {
    const double x = r.uniform(-2.0, 3.0);
    ASSERT_GE(x, -2.0);
    ASSERT_LT(x, 3.0);
  }
}

TEST(Rng, RandintIsUnbiased) {
  Rng r(7);
  std::array<int, 7> counts{};
  const int n = 70000;
  for (int k = 0; k < n; ++k) {
    const auto v = r.randint(3, 10);
    ASSERT_GE(v, 3);
    ASSERT_LT(v, 10);
    ++counts[static_cast<std::size_t>(v - 3)];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 22.5);  // 6 degrees of freedom: p = 0.001
  EXPECT_EQ(r.randint(5, 6), 5);
  EXPECT_THROW(r.randint(5, 5), std::invalid_argument);
}

// Over a range of 3 * 2^62, a multiply-shift without its rejection step gives the multiples of 3
// half the draws instead of a third (the small range above cannot show a bias of 2^-61).
TEST(Rng, RandintRejectsWhatWouldBiasAHugeRange) {
  Rng r(11);
  const int n = 30000;
  int multiples = 0;
  for (int k = 0; k < n; ++k) {
    const auto v = r.randint(INT64_MIN, int64_t{1} << 62);
    ASSERT_LT(v, int64_t{1} << 62);
    multiples += (static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(INT64_MIN)) % 3 == 0;
  }
  // A third is 10000, sd 82; the biased draw gives 15000.
  EXPECT_NEAR(multiples, n / 3, 500);
}

}  // namespace
}  // namespace prepfs::transform

// shared_forms=auto: which forms the shared tier keeps, from the measured costs.
#include "prepfs/partition/shared_forms.h"

#include <gtest/gtest.h>

namespace prepfs {
namespace {

// A 110 kB JPEG decoding to 562 kB of pixels in 1.6 ms, over a source of 2 ms and 100 MB/s.
SharedFormInputs imagenet_over(double shared_latency, double shared_bandwidth) {
  SharedFormInputs in;
  in.raw_bytes = 110e3;
  in.decoded_bytes = 562e3;
  in.c_dec = 1.6e-3;
  in.src_latency = 2e-3;
  in.src_bandwidth = 100e6;
  in.shared_latency = shared_latency;
  in.shared_bandwidth = shared_bandwidth;
  in.shared_measured = true;
  return in;
}

bool shares(const SharedFormChoice& c, Form f) { return c.forms[index_of(f)]; }

TEST(SharedForms, AFastSharedTierKeepsBytesAndPixels) {
  const SharedFormChoice c = choose_shared_forms(imagenet_over(0.2e-3, 2e9));  // 0.48 ms for pixels
  EXPECT_TRUE(shares(c, Form::raw)) << c.why;
  EXPECT_TRUE(shares(c, Form::decoded)) << c.why;
  EXPECT_FALSE(shares(c, Form::augmented));
  EXPECT_NE(c.why.find("decoded shared"), std::string::npos) << c.why;
}

TEST(SharedForms, AThinLinkKeepsBytesButDecodesHere) {
  // 562 kB over 200 MB/s is 2.8 ms, more than fetching 110 kB (0.55+0.5 ms) and decoding (1.6 ms).
  const SharedFormChoice c = choose_shared_forms(imagenet_over(0.5e-3, 200e6));
  EXPECT_TRUE(shares(c, Form::raw)) << c.why;
  EXPECT_FALSE(shares(c, Form::decoded)) << c.why;
}

// Costs within 10% of each other keep whichever choice stands: measured with noise, they flipped
// the decoded form every tick.
TEST(SharedForms, NearEqualCostsKeepTheChoiceThatStands) {
  // A fast source: fetch (0.1 ms + 110 kB at 1 GB/s) and decode (1.6 ms) here take 1.81 ms; the
  // pixels from the shared tier 0.5 ms plus 562 kB at a bandwidth that makes them `ratio` of that.
  auto at = [](double ratio, bool now) {
    SharedFormInputs in = imagenet_over(0.5e-3, 562e3 / (1.81e-3 * ratio - 0.5e-3));
    in.src_latency = 0.1e-3;
    in.src_bandwidth = 1e9;
    in.decoded_shared_now = now;
    return shares(choose_shared_forms(in), Form::decoded);
  };
  for (double ratio : {0.95, 1.05})
    for (bool now : {false, true}) EXPECT_EQ(at(ratio, now), now) << ratio;
  // A clear difference still decides.
  EXPECT_TRUE(at(0.8, false));
  EXPECT_FALSE(at(1.2, true));
}

// A shared tier slower than this node's source still keeps the bytes (the source is every node's),
// but not the pixels.
TEST(SharedForms, ASharedTierSlowerThanTheSourceKeepsOnlyTheBytes) {
  const SharedFormChoice c = choose_shared_forms(imagenet_over(20e-3, 50e6));
  EXPECT_TRUE(shares(c, Form::raw)) << c.why;
  EXPECT_FALSE(shares(c, Form::decoded)) << c.why;
  EXPECT_NE(c.why.find("decoded not shared"), std::string::npos) << c.why;
}

TEST(SharedForms, NoImagesNoPixelsToShare) {
  SharedFormInputs in = imagenet_over(0.2e-3, 2e9);
  in.decoded_bytes = 0;
  EXPECT_FALSE(shares(choose_shared_forms(in), Form::decoded));
}

TEST(SharedForms, UnmeasuredUsesTheStatedPriors) {
  SharedFormInputs in = imagenet_over(0, 0);
  in.shared_measured = false;
  const SharedFormChoice c = choose_shared_forms(in);
  EXPECT_NE(c.why.find("not measured yet: priors 0.5 ms per lookup, 1250 MB/s"), std::string::npos) << c.why;
  // With the priors, pixels take 0.5 + 0.45 ms against 1.6 ms of decode: shared.
  EXPECT_TRUE(shares(c, Form::decoded)) << c.why;
}

// A measured lookup latency without any hit yet keeps the bandwidth prior.
TEST(SharedForms, LatencyMeasuredBeforeAnyHitKeepsTheBandwidthPrior) {
  SharedFormInputs in = imagenet_over(0.3e-3, 0);
  const SharedFormChoice c = choose_shared_forms(in);
  EXPECT_NE(c.why.find("0.300 ms per lookup, 1250 MB/s"), std::string::npos) << c.why;
}

}  // namespace
}  // namespace prepfs

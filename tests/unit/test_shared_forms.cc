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

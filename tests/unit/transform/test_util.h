// Helpers shared by the transform tests: JPEG encoding through libjpeg (to make inputs the C++
// tests need without Python), synthetic images, file I/O and a scripted RandomSource.
#pragma once

#include "prepfs/transform/image.h"
#include "prepfs/transform/rng.h"
#include "prepfs/transform/simd_targets.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace prepfs::transform::testing {

struct EncodeParams {
  int quality = 90;
  bool progressive = false;
  bool arithmetic = false;
  int restart_rows = 0;  // restart interval in MCU rows; 0 = none
  // Colour handling: input components 1 (gray), 3 (RGB) or 4 (CMYK, stored as given).
  // jpeg_space: "auto" (YCbCr for 3, gray for 1, CMYK for 4), "rgb", "ycck", "cmyk".
  std::string jpeg_space = "auto";
  int h_samp = 2, v_samp = 2;  // luma sampling factors (chroma 1x1) for YCbCr/YCCK
};

// Encodes interleaved samples (width * height * components bytes).
std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& samples, int width, int height, int components,
                                      const EncodeParams& p = {});

// Deterministic textured image with edges and noise (components 1, 3 or 4).
std::vector<std::uint8_t> synthetic_samples(int width, int height, int components, std::uint32_t seed);
Image synthetic_image(int width, int height, std::uint32_t seed);

std::vector<std::uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<std::uint8_t>& data);

// Replays recorded draws. Records an error (checked by the test) if asked for a different kind
// of draw, a value outside the requested range, or more draws than recorded.
class ScriptedSource final : public RandomSource {
 public:
  struct Draw {
    bool is_int;
    double u;
    std::int64_t i;
  };
  explicit ScriptedSource(std::vector<Draw> draws) : draws_(std::move(draws)) {}
  double uniform(double lo, double hi) override;
  std::int64_t randint(std::int64_t lo, std::int64_t hi) override;
  bool all_consumed() const { return next_ == draws_.size(); }
  const std::string& error() const { return error_; }

 private:
  std::vector<Draw> draws_;
  std::size_t next_ = 0;
  std::string error_;
};

// Parses "u:0.25 i:3 ..." tokens.
std::vector<ScriptedSource::Draw> parse_draws(const std::vector<std::string>& tokens);

// Mean absolute difference per channel value between two same-size images.
double mean_abs_diff(const Image& a, const Image& b);

// Runs f once per SIMD target this machine has (best first, the portable fallback last) with the
// kernels pinned to it, then restores automatic dispatch. Records a test failure when pinning
// does not take (every target would then test the same code). Returns the number of targets run.
int for_each_simd_target(const std::function<void(const SimdTarget&)>& f);

}  // namespace prepfs::transform::testing

// Pillow 9.4's filter coefficients for one axis of a bilinear resize (precompute_coeffs and
// normalize_coeffs_8bpc in src/libImaging/Resample.c), shared by the scalar and SIMD kernels.
// Private to src/transform/.
#pragma once

#include <cstdint>
#include <vector>

namespace prepfs::transform::detail {

// Fractional bits of the fixed-point weights (PRECISION_BITS = 32 - 8 - 2).
inline constexpr int kPrecisionBits = 32 - 8 - 2;
// Every sum starts at 0.5 so that the final >> kPrecisionBits rounds half up.
inline constexpr std::int32_t kHalf = 1 << (kPrecisionBits - 1);

// Per output pixel along one axis: the first input index, the number of taps and the taps'
// fixed-point weights (non-negative, adding up to about 1 << kPrecisionBits).
struct AxisCoeffs {
  int in_size = 0;
  int out_size = 0;
  int ksize = 0;  // stride of `k`: the largest possible tap count
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> k;  // out_size * ksize, zero past count

  const std::int32_t* weights(int out) const { return &k[static_cast<std::size_t>(out) * ksize]; }
};

// The coefficients for output size out_size over the input span [in0, in1) of an axis of
// in_size pixels. in0/in1 are C floats as in Pillow (its box is float[4]).
AxisCoeffs axis_coeffs(int in_size, float in0, float in1, int out_size);

// Pillow's clip8: the sum's integer part, clamped to 0..255.
inline std::uint8_t clip8(std::int32_t sum) {
  const std::int32_t v = sum >> kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace prepfs::transform::detail

// The two passes of the resampler, in two implementations that give the same bytes:
//  - reference: the pre-SIMD kernels, Pillow's loops one output pixel at a time (kept as the
//    baseline for benchmarks and as an independent implementation for the tests);
//  - simd: Highway kernels dispatched at run time to the best instruction set this CPU has
//    (AVX-512, AVX2, SSE4, else Highway's portable EMU128). See resample_simd.cc.
// Both compute Pillow's integer sums exactly; integer addition does not depend on the order,
// which is all the SIMD kernels change. Private to src/transform/.
#pragma once

#include "prepfs/transform/image.h"

#include "output_view.h"
#include "resample_coeffs.h"

namespace prepfs::transform::detail {

// Horizontal pass: output row r is input row r + row_offset filtered along x.
void horizontal_reference(ImageView in, int row_offset, const AxisCoeffs& c, const OutputView& out);
void horizontal_simd(ImageView in, int row_offset, const AxisCoeffs& c, const OutputView& out);

// Vertical pass: c.first[] is relative to input row row_base (Pillow shifts the bounds by the
// first row the horizontal pass produced). in.width == out.width.
void vertical_reference(ImageView in, int row_base, const AxisCoeffs& c, const OutputView& out);
void vertical_simd(ImageView in, int row_base, const AxisCoeffs& c, const OutputView& out);

// The Highway target (HWY_AVX2, ...) the SIMD passes dispatch to now.
std::int64_t simd_dispatch_target();

}  // namespace prepfs::transform::detail

// The reference passes: the kernels prepfs used before the SIMD ones (issue 13), kept unchanged
// as the baseline benchmarks compare with and as a second implementation the tests hold the SIMD
// kernels against. Pillow's loop order (ImagingResampleHorizontal_8bpc / ..Vertical_8bpc), one
// output pixel at a time, its three channels in one 4-lane GCC vector (the 4th lane is ignored)
// in the horizontal pass and 4 samples per vector in the vertical one.
#include "resample_kernels.h"

#include <vector>

namespace prepfs::transform::detail {
namespace {

// target_clones adds an AVX2 build (pmovzxbd/pmulld) chosen at load time; "default" is SSE2.
#if defined(__x86_64__)
#define PREPFS_REFERENCE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PREPFS_REFERENCE_CLONES
#endif

using v4si = std::int32_t __attribute__((vector_size(16)));

// 4 bytes from p as 4 lanes; the caller guarantees p[3] is inside the buffer.
inline v4si load4(const std::uint8_t* p) { return v4si{p[0], p[1], p[2], p[3]}; }
inline v4si load3(const std::uint8_t* p) { return v4si{p[0], p[1], p[2], 0}; }

}  // namespace

PREPFS_REFERENCE_CLONES void horizontal_reference(ImageView in, int row_offset, const AxisCoeffs& c,
                                                  const OutputView& out) {
  for (int yy = 0; yy < out.height; ++yy) {
    const std::uint8_t* src = in.row(yy + row_offset);
    std::uint8_t* dst = out.row(yy);
    for (int xx = 0; xx < out.width; ++xx) {
      const std::int32_t* k = c.weights(xx);
      const int first = c.first[static_cast<std::size_t>(xx)];
      const int n = c.count[static_cast<std::size_t>(xx)];
      const std::uint8_t* p = src + static_cast<std::ptrdiff_t>(first) * kChannels;
      // A 4-byte load of the row's last pixel could read past the end of the buffer.
      const int n4 = first + n == in.width ? n - 1 : n;
      v4si s = {kHalf, kHalf, kHalf, kHalf};
      int x = 0;
      for (; x < n4; ++x, p += kChannels) s += load4(p) * k[x];
      if (x < n) s += load3(p) * k[x];
      dst[3 * xx + 0] = clip8(s[0]);
      dst[3 * xx + 1] = clip8(s[1]);
      dst[3 * xx + 2] = clip8(s[2]);
    }
  }
}

PREPFS_REFERENCE_CLONES void vertical_reference(ImageView in, int row_base, const AxisCoeffs& c,
                                                const OutputView& out) {
  const int row_len = out.width * kChannels;
  const int nvec = row_len / 4;
  std::vector<v4si> acc(static_cast<std::size_t>(nvec) + 1);
  for (int yy = 0; yy < out.height; ++yy) {
    const std::size_t uy = static_cast<std::size_t>(yy);
    const std::int32_t* k = c.weights(yy);
    for (auto& a : acc) a = v4si{kHalf, kHalf, kHalf, kHalf};
    // Row-major accumulation: the same integer sums as Pillow's per-pixel loop.
    for (int y = 0; y < c.count[uy]; ++y) {
      const std::uint8_t* src = in.row(c.first[uy] - row_base + y);
      const std::int32_t ky = k[y];
      for (int v = 0; v < nvec; ++v) {
        acc[static_cast<std::size_t>(v)] += load4(src + 4 * v) * ky;
      }
      for (int i = 4 * nvec; i < row_len; ++i) {
        acc[static_cast<std::size_t>(nvec)][i - 4 * nvec] += src[i] * ky;
      }
    }
    std::uint8_t* dst = out.row(yy);
    for (int i = 0; i < row_len; ++i) {
      dst[i] = clip8(acc[static_cast<std::size_t>(i / 4)][i % 4]);
    }
  }
}

}  // namespace prepfs::transform::detail

// The SIMD passes, written once with Highway and compiled for several instruction sets (this
// file is included once per target by foreach_target.h); HWY_DYNAMIC_DISPATCH picks the best
// one the CPU has at run time.
//
// Both passes compute exactly Pillow's sums: 8-bit samples times 22-bit weights in int32 lanes,
// starting at 0.5 (kHalf), then >> 22 and a saturating narrowing to bytes (= Pillow's clip8).
// The sums cannot overflow: the weights are non-negative and each is rounded by at most 1/2, so
// a sum stays below 255 * ((1 << 22) + taps / 2) + (1 << 21) < 2^31. Only the order of the
// additions differs from Pillow's, which integer addition does not see.
//
// Memory: the rows of an ImageView lie `stride` bytes apart in one buffer, so the bytes after
// a row's end up to the end of the next row are readable. The horizontal pass's windows may
// read up to plan.read_end bytes from a row's start; a row for which that could leave the view
// (the last row, or a very narrow image) is first copied into a padded scratch row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/transform/resample_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "resample_kernels.h"
#include "resample_plan.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace prepfs::transform::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR
// Highway's fallback for CPUs without a vector target (HWY_SCALAR, one-lane vectors without byte
// shuffles; GCC < 12.3 also gets it instead of EMU128): Pillow's loops.

void HorizontalPass(const ImageView& in, int row_offset, const AxisCoeffs& c, const OutputView& out) {
  for (int yy = 0; yy < out.height; ++yy) {
    const std::uint8_t* src = in.row(yy + row_offset);
    std::uint8_t* dst = out.row(yy);
    for (int xx = 0; xx < out.width; ++xx) {
      const std::int32_t* k = c.weights(xx);
      const std::uint8_t* p = src + 3 * c.first[static_cast<std::size_t>(xx)];
      std::int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int t = 0; t < c.count[static_cast<std::size_t>(xx)]; ++t, p += 3) {
        s0 += p[0] * k[t];
        s1 += p[1] * k[t];
        s2 += p[2] * k[t];
      }
      dst[3 * xx] = clip8(s0);
      dst[3 * xx + 1] = clip8(s1);
      dst[3 * xx + 2] = clip8(s2);
    }
  }
}

void VerticalPass(const ImageView& in, int row_base, const AxisCoeffs& c, const OutputView& out) {
  const int row_len = out.width * kChannels;
  for (int yy = 0; yy < out.height; ++yy) {
    const std::int32_t* k = c.weights(yy);
    const int first = c.first[static_cast<std::size_t>(yy)] - row_base;
    std::uint8_t* dst = out.row(yy);
    for (int i = 0; i < row_len; ++i) {
      std::int32_t sum = kHalf;
      for (int t = 0; t < c.count[static_cast<std::size_t>(yy)]; ++t) sum += in.row(first + t)[i] * k[t];
      dst[i] = clip8(sum);
    }
  }
}

#else  // a vector target

// One 16-byte window per 128-bit block of the vector: block q reads row + base[q] + offset.
template <class D8>
HWY_INLINE hn::Vec<D8> LoadBlockWindows(D8 d8, const std::uint8_t* row, const std::int32_t* base, int offset) {
  constexpr std::size_t kBytes = hn::MaxLanes(D8());
  if constexpr (kBytes <= 16) {
    return hn::LoadU(d8, row + base[0] + offset);
  } else {
    const hn::Half<D8> dh;
    constexpr std::size_t kHalfBlocks = kBytes / 32;
    return hn::Combine(d8, LoadBlockWindows(dh, row, base + kHalfBlocks, offset),
                       LoadBlockWindows(dh, row, base, offset));
  }
}

void HorizontalPass(const ImageView& in, int row_offset, const AxisCoeffs& c, const OutputView& out) {
  const hn::ScalableTag<std::int32_t> di;
  const hn::Repartition<std::uint32_t, decltype(di)> du32;
  const hn::Repartition<std::uint8_t, decltype(di)> d8;  // the same vector as bytes
  const hn::Rebind<std::uint8_t, decltype(di)> d8n;      // one byte per int32 lane
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(decltype(di)()));
  constexpr int kBlocks = kLanes / HorizontalPlan::kLanes;
  const HorizontalPlan p = horizontal_plan(c, kBlocks);
  const int out_bytes = out.width * kChannels;
  const int row_bytes = in.width * kChannels;
  const auto half = hn::Set(di, kHalf);
  const std::size_t weights_stride = static_cast<std::size_t>(p.blocks) * HorizontalPlan::kLanes;

  std::vector<std::uint8_t> scratch;  // padded copy of a row, when needed
  std::array<std::uint8_t, kLanes> narrow{};

  for (int yy = 0; yy < out.height; ++yy) {
    const int y = yy + row_offset;
    const std::uint8_t* src = in.row(y);
    const bool readable = y + 1 < in.height && p.read_end <= in.stride + row_bytes;
    if (!readable) {
      scratch.assign(static_cast<std::size_t>(std::max(p.read_end, row_bytes)), 0);
      std::memcpy(scratch.data(), src, static_cast<std::size_t>(row_bytes));
      src = scratch.data();
    }
    std::uint8_t* dst = out.row(yy);
    for (int v = 0; v < p.vectors; ++v) {
      const std::size_t b = static_cast<std::size_t>(v) * kBlocks;
      const int taps = p.taps[static_cast<std::size_t>(v)];
      const auto index = hn::LoadU(d8, &p.byte_index[b * 16]);
      const std::int32_t* w = &p.weights[b * HorizontalPlan::kLanes];
      auto acc = half;
      if (kBlocks > 1 && p.shared_window[static_cast<std::size_t>(v)]) {
        const auto lanes = hn::SetTableIndices(du32, &p.lane_index[b * HorizontalPlan::kLanes]);
        const std::uint8_t* s = src + p.window_base[static_cast<std::size_t>(v)];
        for (int t = 0; t < taps; ++t, w += weights_stride) {
          const auto window = hn::TableLookupLanes(hn::BitCast(du32, hn::LoadU(d8, s + 3 * t)), lanes);
          const auto samples = hn::BitCast(di, hn::TableLookupBytesOr0(hn::BitCast(d8, window), index));
          acc = hn::Add(acc, hn::Mul(samples, hn::LoadU(di, w)));
        }
      } else {
        for (int t = 0; t < taps; ++t, w += weights_stride) {
          const auto window = LoadBlockWindows(d8, src, &p.block_base[b], 3 * t);
          const auto samples = hn::BitCast(di, hn::TableLookupBytesOr0(window, index));
          acc = hn::Add(acc, hn::Mul(samples, hn::LoadU(di, w)));
        }
      }
      const auto bytes = hn::DemoteTo(d8n, hn::ShiftRight<kPrecisionBits>(acc));
      const int first_byte = static_cast<int>(p.per_pixel ? 3 * b : 4 * b);
      if (!p.per_pixel && first_byte + kLanes <= out_bytes) {
        hn::StoreU(bytes, d8n, dst + first_byte);
        continue;
      }
      hn::StoreU(bytes, d8n, narrow.data());
      if (p.per_pixel) {
        for (int q = 0; q < kBlocks && static_cast<int>(b) + q < p.out_width; ++q) {
          std::memcpy(dst + first_byte + 3 * q, &narrow[static_cast<std::size_t>(4 * q)], 3);
        }
      } else {
        std::memcpy(dst + first_byte, narrow.data(), static_cast<std::size_t>(out_bytes - first_byte));
      }
    }
  }
}

// Sums the n rows over kVectors vectors of samples from byte x on and stores them to dst + x.
template <int kVectors>
HWY_INLINE void VerticalSpan(const std::uint8_t* const* rows, const std::int32_t* k, int n, int x, std::uint8_t* dst) {
  const hn::ScalableTag<std::int32_t> di;
  const hn::Rebind<std::uint8_t, decltype(di)> d8n;
  const int lanes = static_cast<int>(hn::Lanes(di));
  hn::Vec<decltype(di)> acc[kVectors];
  for (int v = 0; v < kVectors; ++v) acc[v] = hn::Set(di, kHalf);
  for (int t = 0; t < n; ++t) {
    const auto w = hn::Set(di, k[t]);
    const std::uint8_t* p = rows[t] + x;
    for (int v = 0; v < kVectors; ++v) {
      acc[v] = hn::Add(acc[v], hn::Mul(hn::PromoteTo(di, hn::LoadU(d8n, p + v * lanes)), w));
    }
  }
  for (int v = 0; v < kVectors; ++v) {
    hn::StoreU(hn::DemoteTo(d8n, hn::ShiftRight<kPrecisionBits>(acc[v])), d8n, dst + x + v * lanes);
  }
}

void VerticalPass(const ImageView& in, int row_base, const AxisCoeffs& c, const OutputView& out) {
  const hn::ScalableTag<std::int32_t> di;
  const int lanes = static_cast<int>(hn::Lanes(di));
  const int row_len = out.width * kChannels;
  std::vector<const std::uint8_t*> rows(static_cast<std::size_t>(c.ksize));
  for (int yy = 0; yy < out.height; ++yy) {
    const std::int32_t* k = c.weights(yy);
    const int first = c.first[static_cast<std::size_t>(yy)] - row_base;
    const int n = c.count[static_cast<std::size_t>(yy)];
    for (int t = 0; t < n; ++t) rows[static_cast<std::size_t>(t)] = in.row(first + t);
    std::uint8_t* dst = out.row(yy);
    if (row_len < lanes) {  // narrower than one vector: Pillow's loop
      for (int i = 0; i < row_len; ++i) {
        std::int32_t s = kHalf;
        for (int t = 0; t < n; ++t) s += rows[static_cast<std::size_t>(t)][i] * k[t];
        dst[i] = clip8(s);
      }
      continue;
    }
    int x = 0;
    for (; x + 4 * lanes <= row_len; x += 4 * lanes) VerticalSpan<4>(rows.data(), k, n, x, dst);
    for (; x + lanes <= row_len; x += lanes) VerticalSpan<1>(rows.data(), k, n, x, dst);
    // The tail as one vector ending at the row's end; it recomputes some bytes, to equal values.
    if (x < row_len) VerticalSpan<1>(rows.data(), k, n, row_len - lanes, dst);
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

// Which instruction set this copy of the file was compiled for.
std::int64_t CompiledTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace prepfs::transform::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace prepfs::transform::detail {

HWY_EXPORT(HorizontalPass);
HWY_EXPORT(VerticalPass);
HWY_EXPORT(CompiledTarget);

void horizontal_simd(ImageView in, int row_offset, const AxisCoeffs& c, const OutputView& out) {
  HWY_DYNAMIC_DISPATCH(HorizontalPass)(in, row_offset, c, out);
}

void vertical_simd(ImageView in, int row_base, const AxisCoeffs& c, const OutputView& out) {
  HWY_DYNAMIC_DISPATCH(VerticalPass)(in, row_base, c, out);
}

std::int64_t simd_dispatch_target() { return HWY_DYNAMIC_DISPATCH(CompiledTarget)(); }

}  // namespace prepfs::transform::detail
#endif  // HWY_ONCE

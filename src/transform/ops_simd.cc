// hflip's row mirroring with SIMD, dispatched like the resampler (see resample_simd.cc): 16 pixels
// at a time are split into R, G and B planes, each plane reversed with one byte shuffle, and
// interleaved again at the mirrored position. Loads and stores stay inside the row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/transform/ops_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops_kernels.h"

#include <cstring>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace prepfs::transform::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst pixel j = src pixel width - 1 - j.
void MirrorRow(const std::uint8_t* src, std::uint8_t* dst, int width) {
  int i = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::Full128<std::uint8_t> d;
  alignas(16) static constexpr std::uint8_t kReverse[16] = {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  const auto reverse = hn::Load(d, kReverse);
  for (; i + 16 <= width; i += 16) {
    hn::Vec<decltype(d)> r, g, b;
    hn::LoadInterleaved3(d, src + 3 * i, r, g, b);
    hn::StoreInterleaved3(hn::TableLookupBytes(r, reverse), hn::TableLookupBytes(g, reverse),
                          hn::TableLookupBytes(b, reverse), d, dst + 3 * (width - i - 16));
  }
#endif
  for (; i < width; ++i) std::memcpy(dst + 3 * (width - 1 - i), src + 3 * i, 3);
}

void MirrorRows(const OutputView& img) {
  std::vector<std::uint8_t> row(static_cast<std::size_t>(img.width) * 3);
  for (int y = 0; y < img.height; ++y) {
    if (row.empty()) break;
    std::memcpy(row.data(), img.row(y), row.size());
    MirrorRow(row.data(), img.row(y), img.width);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace prepfs::transform::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace prepfs::transform::detail {

HWY_EXPORT(MirrorRows);

void mirror_rows(const OutputView& img) { HWY_DYNAMIC_DISPATCH(MirrorRows)(img); }

}  // namespace prepfs::transform::detail
#endif  // HWY_ONCE

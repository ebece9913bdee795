// Rows that a kernel writes, for the SIMD kernels of src/transform/. Private to src/transform/.
#pragma once

#include "prepfs/transform/image.h"

#include <cstddef>
#include <cstdint>

namespace prepfs::transform::detail {

// Rows of width * 3 bytes, `stride` apart. (An intermediate image need not be a zero-filled
// Image when every byte is written.)
struct OutputView {
  std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;

  std::uint8_t* row(int y) const { return data + static_cast<std::ptrdiff_t>(y) * stride; }
};

inline OutputView output_view(Image& img) { return {img.pixels.data(), img.width, img.height, img.stride()}; }

}  // namespace prepfs::transform::detail

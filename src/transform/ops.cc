#include "prepfs/transform/ops.h"

#include <algorithm>
#include <cstring>

namespace prepfs::transform {

void hflip(Image& img) {
  for (int y = 0; y < img.height; ++y) {
    std::uint8_t* r = img.row(y);
    for (int a = 0, b = img.width - 1; a < b; ++a, --b) {
      std::uint8_t* pa = r + 3 * a;
      std::uint8_t* pb = r + 3 * b;
      std::swap(pa[0], pb[0]);
      std::swap(pa[1], pb[1]);
      std::swap(pa[2], pb[2]);
    }
  }
}

Image crop_padded(ImageView src, const CenterCrop& g) {
  Image out(g.width, g.height);  // zero-initialised: the padding
  // Columns of the output that map inside the source.
  const int x_begin = std::max(0, -g.left);
  const int x_end = std::min(g.width, src.width - g.left);
  if (x_end <= x_begin) return out;
  const std::size_t bytes = static_cast<std::size_t>(x_end - x_begin) * kChannels;
  for (int y = 0; y < g.height; ++y) {
    const int sy = y + g.top;
    if (sy < 0 || sy >= src.height) continue;
    std::memcpy(out.row(y) + x_begin * kChannels, src.row(sy) + (x_begin + g.left) * kChannels, bytes);
  }
  return out;
}

}  // namespace prepfs::transform

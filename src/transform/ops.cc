#include "prepfs/transform/ops.h"

#include "ops_kernels.h"

#include <algorithm>
#include <cstring>

namespace prepfs::transform {

void hflip(Image& img) { detail::mirror_rows(detail::output_view(img)); }

Image crop_padded(ImageView src, const CenterCrop& g) {
  Image out(g.width, g.height);
  std::fill(out.pixels.begin(), out.pixels.end(), std::uint8_t{0});  // the padding (Image leaves pixels unset)
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

#include "prepfs/transform/image.h"

#include <cstring>

namespace prepfs::transform {

Image copy_image(ImageView v) {
  Image out(v.width, v.height);
  const std::size_t row_bytes = static_cast<std::size_t>(v.width) * kChannels;
  for (int y = 0; y < v.height; ++y) {
    if (row_bytes != 0) std::memcpy(out.row(y), v.row(y), row_bytes);
  }
  return out;
}

}  // namespace prepfs::transform

// Pillow-exact bilinear resampling: the pass structure of ImagingResampleInner. The algorithm
// and its constants are described in resample.h; the coefficients are in resample_coeffs.cc and
// the two implementations of the passes in resample_reference.cc and resample_simd.cc.
#include "prepfs/transform/resample.h"

#include "resample_kernels.h"

#include <stdexcept>

namespace prepfs::transform {

using detail::axis_coeffs;
using detail::AxisCoeffs;

Image resize_bilinear(ImageView src, int out_w, int out_h, ResampleKernel kernel) {
  return resize_bilinear(src, out_w, out_h, BoxF{0, 0, static_cast<double>(src.width), static_cast<double>(src.height)},
                         kernel);
}

Image resize_bilinear(ImageView src, int out_w, int out_h, BoxF box_d, ResampleKernel kernel) {
  if (out_w < 1 || out_h < 1 || src.width < 1 || src.height < 1) {
    throw std::invalid_argument("resize_bilinear: empty image");
  }
  const float box[4] = {static_cast<float>(box_d.x0), static_cast<float>(box_d.y0), static_cast<float>(box_d.x1),
                        static_cast<float>(box_d.y1)};
  if (box[0] < 0 || box[1] < 0 || box[2] > static_cast<float>(src.width) || box[3] > static_cast<float>(src.height) ||
      box[2] - box[0] < 0 || box[3] - box[1] < 0) {
    throw std::invalid_argument("resize_bilinear: box outside the image");
  }
  // Pillow's Image.resize returns a copy when nothing changes.
  if (out_w == src.width && out_h == src.height && box[0] == 0 && box[1] == 0 &&
      box[2] == static_cast<float>(src.width) && box[3] == static_cast<float>(src.height)) {
    return copy_image(src);
  }
  // ImagingResampleInner's tests, including the comparison of box[2] with the output size.
  const bool need_h = out_w != src.width || box[0] != 0 || box[2] != static_cast<float>(out_w);
  const bool need_v = out_h != src.height || box[1] != 0 || box[3] != static_cast<float>(out_h);
  const bool simd = kernel == ResampleKernel::kSimd;

  const AxisCoeffs cv = axis_coeffs(src.height, box[1], box[3], out_h);
  const int ybox_first = cv.first[0];
  const std::size_t last = static_cast<std::size_t>(out_h - 1);
  const int ybox_last = cv.first[last] + cv.count[last];

  ImageView cur = src;
  int cur_row_base = 0;  // which source row cur.row(0) is
  Image tmp;
  if (need_h) {
    const AxisCoeffs ch = axis_coeffs(src.width, box[0], box[2], out_w);
    tmp = Image(out_w, ybox_last - ybox_first);
    if (simd) {
      detail::horizontal_simd(src, ybox_first, ch, tmp);
    } else {
      detail::horizontal_reference(src, ybox_first, ch, tmp);
    }
    cur = tmp.view();
    cur_row_base = ybox_first;
  }
  if (need_v) {
    Image out(cur.width, out_h);
    if (simd) {
      detail::vertical_simd(cur, cur_row_base, cv, out);
    } else {
      detail::vertical_reference(cur, cur_row_base, cv, out);
    }
    return out;
  }
  // Only the horizontal pass ran (the vertical box spans the image rows exactly).
  return tmp;
}

}  // namespace prepfs::transform

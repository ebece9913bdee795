// Pillow-exact bilinear resampling: the pass structure of ImagingResampleInner. The algorithm
// and its constants are described in resample.h; the coefficients are in resample_coeffs.cc and
// the two implementations of the passes in resample_reference.cc and resample_simd.cc.
#include "prepfs/transform/resample.h"

#include "resample_kernels.h"

#include <memory>
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

  const auto horizontal = [&](const AxisCoeffs& c, const detail::OutputView& out) {
    if (simd) {
      detail::horizontal_simd(src, ybox_first, c, out);
    } else {
      detail::horizontal_reference(src, ybox_first, c, out);
    }
  };
  ImageView cur = src;
  int cur_row_base = 0;                 // which source row cur.row(0) is
  std::unique_ptr<std::uint8_t[]> tmp;  // the horizontal pass's rows, when the vertical one follows
  if (need_h) {
    const AxisCoeffs ch = axis_coeffs(src.width, box[0], box[2], out_w);
    const int rows = ybox_last - ybox_first;
    if (!need_v) {  // the vertical box spans the image rows exactly: rows == out_h
      Image out(out_w, rows);
      horizontal(ch, detail::output_view(out));
      return out;
    }
    const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(out_w) * kChannels;
    tmp = std::make_unique_for_overwrite<std::uint8_t[]>(static_cast<std::size_t>(stride) * rows);
    horizontal(ch, detail::OutputView{tmp.get(), out_w, rows, stride});
    cur = ImageView{tmp.get(), out_w, rows, stride};
    cur_row_base = ybox_first;
  }
  Image out(cur.width, out_h);
  if (simd) {
    detail::vertical_simd(cur, cur_row_base, cv, detail::output_view(out));
  } else {
    detail::vertical_reference(cur, cur_row_base, cv, detail::output_view(out));
  }
  return out;
}

}  // namespace prepfs::transform

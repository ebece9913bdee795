// Pipeline execution; see augment.h for the exact and fast paths.
#include "prepfs/transform/augment.h"

#include "prepfs/transform/error.h"
#include "prepfs/transform/ops.h"
#include "prepfs/transform/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <xxhash.h>

namespace prepfs::transform {
namespace {

// One op on a view of the current pixels. `owned` is the image behind the view when the caller
// gives it up (then ops that keep the pixels, like a resize to the same size, move it instead of
// copying), or null when the view is borrowed.
Image apply_op(ImageView v, Image* owned, const Op& op, RandomSource& rs, ResampleKernel kernel) {
  const auto keep = [&] { return owned ? std::move(*owned) : copy_image(v); };
  if (const auto* r = std::get_if<RrcOp>(&op)) {
    const CropBox b = sample_rrc_box(v.width, v.height, r->params, rs);
    const ImageView crop = v.sub(b.left, b.top, b.width, b.height);
    if (b.width == r->size.width && b.height == r->size.height) return copy_image(crop);
    return resize_bilinear(crop, r->size.width, r->size.height, kernel);  // reads the crop only
  }
  if (const auto* z = std::get_if<ResizeOp>(&op)) {
    const Size t = z->shorter > 0 ? resize_shorter_size(v.width, v.height, z->shorter) : z->size;
    // torchvision F.resize: a resize to the current size returns the image unchanged.
    if (t.width == v.width && t.height == v.height) return keep();
    return resize_bilinear(v, t.width, t.height, kernel);
  }
  if (const auto* c = std::get_if<CenterCropOp>(&op)) {
    return crop_padded(v, center_crop_geometry(v.width, v.height, c->size.height, c->size.width));
  }
  const auto& h = std::get<HflipOp>(op);
  Image img = keep();
  // torchvision draws torch.rand(1) whatever p is; so do we, to keep streams aligned.
  if (rs.uniform(0.0, 1.0) < h.p) hflip(img);
  return img;
}

}  // namespace

void check_sizes(const PipelineSpec& spec, int width, int height, std::uint64_t max_pixels) {
  Size cur{width, height};
  for (const Op& op : spec.ops()) {
    if (const auto* r = std::get_if<RrcOp>(&op)) {
      cur = r->size;
    } else if (const auto* z = std::get_if<ResizeOp>(&op)) {
      cur = z->shorter > 0 ? resize_shorter_size(cur.width, cur.height, z->shorter) : z->size;
    } else if (const auto* c = std::get_if<CenterCropOp>(&op)) {
      cur = c->size;
    }
    if (cur.width < 1 || cur.height < 1 || std::uint64_t(cur.width) * std::uint64_t(cur.height) > max_pixels) {
      throw DecodeError(DecodeError::Kind::kTooLarge, "pipeline '" + spec.canonical() + "' makes a " +
                                                          std::to_string(cur.width) + "x" + std::to_string(cur.height) +
                                                          " image from a " + std::to_string(width) + "x" +
                                                          std::to_string(height) + " source");
    }
  }
}

namespace {

// Smallest DCT scale (8ths) in {1, 2, 4} keeping (src_w x src_h) * M/8 >= ratio * target;
// 8 when none does. Only these scales: libjpeg-turbo has SIMD IDCTs for them, and the odd ones
// (3/8, 5/8, ...) run generic C code that is slower than decoding at full size.
int pick_scale(double src_w, double src_h, Size target, double ratio) {
  for (int m : {1, 2, 4}) {
    if (src_w * m / 8.0 >= ratio * target.width && src_h * m / 8.0 >= ratio * target.height) {
      return m;
    }
  }
  return 8;
}

// The first op is rrc: decode what the crop needs, at the chosen scale, and resample it.
Image fast_rrc(JpegReader& rd, const RrcOp& op, RandomSource& rs, const FastPaths& fast, ResampleKernel kernel) {
  const CropBox b = sample_rrc_box(rd.width(), rd.height(), op.params, rs);
  const int m = fast.dct_scale ? pick_scale(b.width, b.height, op.size, fast.dct_min_ratio) : 8;
  const auto [fw, fh] = rd.scaled_size(m);
  const double f = m / 8.0;
  // The crop in scaled-frame coordinates, and the whole pixels that hold it.
  const double bx0 = b.left * f, by0 = b.top * f;
  const double bx1 = std::min<double>(fw, (b.left + b.width) * f);
  const double by1 = std::min<double>(fh, (b.top + b.height) * f);
  const int rx0 = static_cast<int>(std::floor(bx0)), ry0 = static_cast<int>(std::floor(by0));
  const int rx1 = std::max(rx0 + 1, static_cast<int>(std::ceil(bx1)));
  const int ry1 = std::max(ry0 + 1, static_cast<int>(std::ceil(by1)));

  DecodedRegion d = fast.crop_decode ? rd.decode(m, Rect{rx0, ry0, rx1 - rx0, ry1 - ry0}, !fast.stop_below_crop)
                                     : rd.decode(m);
  const ImageView v = d.image.view().sub(rx0 - d.x, ry0 - d.y, rx1 - rx0, ry1 - ry0);
  if (m == 8) {
    // Integer crop: exactly torchvision's crop-then-resize.
    if (v.width == op.size.width && v.height == op.size.height) return copy_image(v);
    return resize_bilinear(v, op.size.width, op.size.height, kernel);
  }
  return resize_bilinear(v, op.size.width, op.size.height, BoxF{bx0 - rx0, by0 - ry0, bx1 - rx0, by1 - ry0}, kernel);
}

// The first op is resize: DCT-downscale the whole frame, then resample to the exact target.
Image fast_resize(JpegReader& rd, const ResizeOp& op, RandomSource& rs, const FastPaths& fast, ResampleKernel kernel) {
  const Size target = op.shorter > 0 ? resize_shorter_size(rd.width(), rd.height(), op.shorter) : op.size;
  const int m = fast.dct_scale ? pick_scale(rd.width(), rd.height(), target, fast.dct_min_ratio) : 8;
  DecodedRegion d = rd.decode(m);
  if (m == 8) return apply_op(d.image.view(), &d.image, op, rs, kernel);
  const double f = m / 8.0;
  return resize_bilinear(
      d.image.view(), target.width, target.height,
      BoxF{0, 0, std::min<double>(d.frame_width, rd.width() * f), std::min<double>(d.frame_height, rd.height() * f)},
      kernel);
}

// The first op is center_crop: decode only the crop's rows and columns.
Image fast_center_crop(JpegReader& rd, const CenterCropOp& op) {
  const CenterCrop g = center_crop_geometry(rd.width(), rd.height(), op.size.height, op.size.width);
  const int x0 = std::max(0, g.left), y0 = std::max(0, g.top);
  const int x1 = std::min(rd.width(), g.left + g.width);
  const int y1 = std::min(rd.height(), g.top + g.height);
  if (x1 <= x0 || y1 <= y0) return crop_padded(rd.decode().image.view(), g);
  DecodedRegion d = rd.decode(8, Rect{x0, y0, x1 - x0, y1 - y0});
  CenterCrop rel = g;
  rel.top -= d.y;
  rel.left -= d.x;
  return crop_padded(d.image.view(), rel);
}

}  // namespace

bool decodes_at_dct_scale(const PipelineSpec& spec, int width, int height, Rng rng, const FastPaths& fast) {
  if (!fast.dct_scale || spec.ops().empty()) return false;
  const Op& first = spec.ops().front();  // the choice fast_rrc and fast_resize make
  if (const auto* r = std::get_if<RrcOp>(&first)) {
    const CropBox b = sample_rrc_box(width, height, r->params, rng);
    return pick_scale(b.width, b.height, r->size, fast.dct_min_ratio) != 8;
  }
  if (const auto* z = std::get_if<ResizeOp>(&first)) {
    const Size target = z->shorter > 0 ? resize_shorter_size(width, height, z->shorter) : z->size;
    return pick_scale(width, height, target, fast.dct_min_ratio) != 8;
  }
  return false;
}

Image apply_ops(Image img, std::span<const Op> ops, RandomSource& rs, ResampleKernel kernel) {
  for (const Op& op : ops) img = apply_op(img.view(), &img, op, rs, kernel);
  return img;
}

Image apply_ops(ImageView src, std::span<const Op> ops, RandomSource& rs, ResampleKernel kernel) {
  if (ops.empty()) return copy_image(src);
  return apply_ops(apply_op(src, nullptr, ops.front(), rs, kernel), ops.subspan(1), rs, kernel);
}

Image augment_jpeg(std::span<const std::uint8_t> jpeg, const PipelineSpec& spec, RandomSource& rs,
                   const AugmentOptions& opts) {
  JpegReader rd(jpeg, opts.limits);
  check_sizes(spec, rd.width(), rd.height(), opts.limits.max_pixels);
  const std::span<const Op> ops(spec.ops());
  const FastPaths& fast = opts.fast;
  const ResampleKernel kernel = opts.resample;
  if (!ops.empty() && (fast.crop_decode || fast.dct_scale)) {
    const Op& first = ops.front();
    if (const auto* r = std::get_if<RrcOp>(&first)) {
      return apply_ops(fast_rrc(rd, *r, rs, fast, kernel), ops.subspan(1), rs, kernel);
    }
    if (const auto* z = std::get_if<ResizeOp>(&first); z && fast.dct_scale) {
      return apply_ops(fast_resize(rd, *z, rs, fast, kernel), ops.subspan(1), rs, kernel);
    }
    if (const auto* c = std::get_if<CenterCropOp>(&first); c && fast.crop_decode) {
      return apply_ops(fast_center_crop(rd, *c), ops.subspan(1), rs, kernel);
    }
  }
  return apply_ops(std::move(rd.decode().image), ops, rs, kernel);
}

std::uint64_t pipeline_key(const PipelineSpec& spec, const FastPaths& fast) {
  std::string s = spec.canonical();
  s += "|dct_scale=" + std::to_string(fast.dct_scale ? 1 : 0);
  if (fast.dct_scale) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", fast.dct_min_ratio);
    s += "|dct_min_ratio=";
    s += buf;
  }
  return XXH3_64bits_withSeed(s.data(), s.size(), kTransformVersion);
}

}  // namespace prepfs::transform

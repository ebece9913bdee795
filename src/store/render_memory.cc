#include "prepfs/store/render_memory.h"

#include <algorithm>
#include <variant>

#include "prepfs/transform/crop_sampler.h"

namespace prepfs {
namespace {

constexpr uint64_t kChannels = 3;

// The largest number of pixels alive at once while the pipeline runs on a width x height image
// it owns: for each op, its input, its output, and (resampling runs in two passes) the
// intermediate of the output's width by the input's height.
uint64_t peak_pixels(const transform::PipelineSpec& spec, uint64_t width, uint64_t height) {
  uint64_t w = width, h = height, peak = w * h;
  for (const transform::Op& op : spec.ops()) {
    uint64_t ow = w, oh = h;
    if (const auto* r = std::get_if<transform::RrcOp>(&op)) {
      ow = r->size.width, oh = r->size.height;
    } else if (const auto* z = std::get_if<transform::ResizeOp>(&op)) {
      const transform::Size t = z->shorter > 0 ? transform::resize_shorter_size(int(w), int(h), z->shorter) : z->size;
      ow = uint64_t(std::max(t.width, 0)), oh = uint64_t(std::max(t.height, 0));
    } else if (const auto* c = std::get_if<transform::CenterCropOp>(&op)) {
      ow = c->size.width, oh = c->size.height;
    } else {
      continue;  // hflip works in place
    }
    peak = std::max(peak, w * h + ow * h + ow * oh);
    w = ow, h = oh;
  }
  return peak;
}

// libjpeg's coefficient buffers at worst: four components at full resolution, 64 coefficients of
// 2 bytes per 8x8 block, blocks rounded up to whole MCUs (up to 4 blocks of sampling factor).
uint64_t worst_coefficients(uint64_t width, uint64_t height) {
  return 4 * ((width + 7) / 8 + 4) * ((height + 7) / 8 + 4) * 64 * 2;
}

}  // namespace

RenderMemory render_memory(const SampleShapes& shapes, ImageDims dims, uint64_t input_bytes, RenderPath path,
                           uint64_t budget) {
  const uint64_t w = dims.width, h = dims.height;
  RenderMemory m;
  switch (path) {
    case RenderPath::decode:
      m.output = shapes.decoded_size(dims);  // the pixels are decoded straight into it
      break;
    case RenderPath::augment_from_jpeg:
    case RenderPath::augment_from_pixels:
      m.pixels = kChannels * peak_pixels(shapes.spec, w, h);
      m.output = shapes.augmented_size(dims);
      break;
  }
  if (path == RenderPath::augment_from_pixels) return m;
  m.input = input_bytes;
  // Row buffers (a few MCU rows of four components, upsampling context), row pointers, tables.
  m.libjpeg_base = (1ull << 20) + 512 * w + 8 * h;
  const uint64_t rest = m.total();
  m.libjpeg_coefficients = std::min(worst_coefficients(w, h), budget > rest ? budget - rest : 0);
  return m;
}

}  // namespace prepfs

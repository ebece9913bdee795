#include "prepfs/index/sample_shapes.h"

#include <sys/stat.h>

namespace prepfs {

uint64_t SampleShapes::decoded_size(ImageDims d) const {
  return transform::encoded_size(format, static_cast<int>(d.width), static_cast<int>(d.height));
}

uint64_t SampleShapes::augmented_size(ImageDims d) const {
  transform::Size out = spec.output_size(static_cast<int>(d.width), static_cast<int>(d.height));
  return transform::encoded_size(format, out.width, out.height);
}

uint64_t SampleShapes::decoded_header_size(ImageDims d) const {
  return transform::encoded_header(format, static_cast<int>(d.width), static_cast<int>(d.height)).size();
}

void for_each_sample(const Tree& tree, const SampleShapes& shapes, const std::function<void(uint32_t)>& fn) {
  for (uint32_t id = 0; id < tree.size(); id++)
    if (S_ISREG(tree.mode(id)) && shapes.is_sample(tree.dims(id))) fn(id);
}

}  // namespace prepfs

// Which files of the index are samples, and the exact sizes of their derived files, from the
// header dimensions alone (stat() answers before anything is decoded). One definition for the
// views, the store, the placer, the planner and the profiler: a JPEG whose header claims more
// than max_pixels is not a sample (decoded/ and augmented/ answer EIO for it, raw/ serves it as
// any other file, and the partition admits it as read).
#pragma once

#include <cstdint>
#include <functional>

#include "prepfs/index/tree.h"
#include "prepfs/transform/encoders.h"
#include "prepfs/transform/pipeline_spec.h"

namespace prepfs {

struct SampleShapes {
  transform::OutputFormat format = transform::OutputFormat::kPpm;
  transform::PipelineSpec spec;  // the augmentation pipeline, for the output size
  uint64_t max_pixels = 100'000'000;

  bool is_sample(ImageDims d) const { return d.is_image() && uint64_t(d.width) * d.height <= max_pixels; }
  bool too_large(ImageDims d) const { return d.is_image() && !is_sample(d); }
  // A sample, or a file whose header has not been read yet (a lazy first mount): the placement
  // treats it as a sample until its header says otherwise.
  bool maybe_sample(ImageDims d) const { return !d.known() || is_sample(d); }
  uint64_t decoded_size(ImageDims d) const;
  uint64_t augmented_size(ImageDims d) const;
  // Bytes of the decoded file before its pixels (the PPM/NPY header).
  uint64_t decoded_header_size(ImageDims d) const;
};

// Calls fn for every regular file of the tree that is a sample, in node order.
void for_each_sample(const Tree& tree, const SampleShapes& shapes, const std::function<void(uint32_t node)>& fn);

}  // namespace prepfs

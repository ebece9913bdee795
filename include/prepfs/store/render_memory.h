// How much memory one render may use at its peak, from what is known before any byte is fetched:
// the header's dimensions (in the index), the input's size (its version) and the pipeline. The
// renderer takes this much of transform_mem before it fetches the input and gives it back after,
// and caps libjpeg at its share, so the memory all renders use together stays within the budget.
#pragma once

#include <cstdint>

#include "prepfs/index/sample_shapes.h"
#include "prepfs/index/tree.h"

namespace prepfs {

enum class RenderPath {
  decode,               // decoded/: JPEG -> header + pixels
  augment_from_jpeg,    // augmented/ from the JPEG bytes
  augment_from_pixels,  // augmented/ from cached decoded pixels (no input, no libjpeg)
};

struct RenderMemory {
  uint64_t input = 0;         // the JPEG bytes in memory
  uint64_t pixels = 0;        // decoded and intermediate images at the pipeline's peak
  uint64_t output = 0;        // the encoded file
  uint64_t libjpeg_base = 0;  // libjpeg's row buffers and tables (any JPEG)
  // libjpeg's whole-image coefficient buffers (progressive and multi-scan JPEGs only): the worst
  // case for the dimensions (four full-resolution components), capped so the total fits the
  // budget. A JPEG that needs more fails to decode (EIO) without allocating it.
  uint64_t libjpeg_coefficients = 0;

  uint64_t libjpeg() const { return libjpeg_base + libjpeg_coefficients; }
  uint64_t total() const { return input + pixels + output + libjpeg(); }
};

// The memory of one render within `budget`; total() > budget when even without coefficient
// buffers it cannot fit (the render is refused before anything is fetched).
RenderMemory render_memory(const SampleShapes& shapes, ImageDims dims, uint64_t input_bytes, RenderPath path,
                           uint64_t budget);

}  // namespace prepfs

// One sample, resolved once per request: everything the read path needs to know about it,
// computed from the index and the placement at the start of the request and passed along.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "prepfs/index/tree.h"
#include "prepfs/partition/placer.h"
#include "prepfs/source/source.h"

namespace prepfs {

struct Sample {
  uint32_t node = 0;
  std::string path;     // relative source path
  FileVersion version;  // what the cache keys and source reads are checked against
  ImageDims dims;
  bool is_sample = false;    // a JPEG within max_pixels (index/sample_shapes.h)
  bool placed = false;       // a placement is enforced (else every fill is kept everywhere)
  std::optional<Slot> slot;  // where the placement keeps this sample, if anywhere
  uint8_t held = 0;          // (form, tier) pairs the plan gives room at all (Placer::Placement::held)
};

}  // namespace prepfs

// Finds which source files are JPEG images and their dimensions, from a small read of each
// file's header (16 KiB, more only when an EXIF block pushes the frame header further). The
// decoded/ and augmented/ views list only these files, and their stat() sizes follow from the
// dimensions, exactly, before anything is decoded.
#pragma once

#include <cstdint>

#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"

namespace prepfs {

// Dimensions of one file, or {0, 0} when it is not a JPEG we can serve.
ImageDims probe_image(Source& source, const std::string& rel, const FileVersion& version);

// Probes every regular file of the tree with `threads` readers (latency-bound on remote
// storage, so more threads than cores) and records the results in the tree. Files that `previous`
// (an older index of the same source) holds with the same version keep their recorded
// dimensions without a read.
void probe_images(Tree& tree, Source& source, unsigned threads, const Tree* previous = nullptr);

}  // namespace prepfs

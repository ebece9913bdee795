// Finds which source files are JPEG images and their dimensions, from a small read of each
// file's header (16 KiB, more only when an EXIF block pushes the frame header further). The
// decoded/ and augmented/ views list only these files, and their stat() sizes follow from the
// dimensions, exactly, before anything is decoded.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"

namespace prepfs {

// Dimensions of one file, or {0, 0} when it is not a JPEG we can serve.
ImageDims probe_image(Source& source, const std::string& rel, const FileVersion& version);

// Dimensions from the first bytes of a file: {0, 0} when it is not a JPEG we serve, nullopt when
// the header goes on past `head` (an APPn block before the frame header).
std::optional<ImageDims> dims_from_head(std::span<const uint8_t> head, uint64_t file_size);

// Probes every regular file of the tree with `threads` readers (latency-bound on remote
// storage, so more threads than cores) and records the results in the tree. Files that `previous`
// (an older index of the same source) holds with the same version keep their recorded
// dimensions without a read. With threads == 0 nothing is read: the others are marked unprobed,
// for the HeaderProber (store/header_prober.h) to read while the mount serves.
void probe_images(Tree& tree, Source& source, unsigned threads, const Tree* previous = nullptr);

}  // namespace prepfs

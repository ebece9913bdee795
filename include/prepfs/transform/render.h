// What the decoded/ and augmented/ views serve for one source file: the file sizes (from the
// header alone, for stat()) and the file bytes. This is the transform layer's interface for
// core/; everything else in transform/ is its building blocks.
//
//   JpegInfo info = read_jpeg_info(prefix_or_file, max_pixels);       // or parse_jpeg_header
//   st_size = decoded_file_size(info, fmt);                            // exact, nothing decoded
//   render_decoded(jpeg, fmt, entry_buffer);                           // PIL-equal pixels
//   Rng rng = Rng::for_variant(seed, path, k);
//   bytes = render_augmented(jpeg, spec, rng, fmt, opts);              // variant k
#pragma once

#include "prepfs/transform/augment.h"
#include "prepfs/transform/encoders.h"
#include "prepfs/transform/jpeg_header.h"

#include <cstdint>
#include <span>
#include <vector>

namespace prepfs::transform {

std::uint64_t decoded_file_size(const JpegInfo& info, OutputFormat f);
std::uint64_t augmented_file_size(const JpegInfo& info, const PipelineSpec& spec, OutputFormat f);

// Writes header + exact pixels into out (at least decoded_file_size() bytes), decoding straight
// into it; returns the number of bytes written. Throws DecodeError (EIO) for bad input.
std::size_t render_decoded(std::span<const std::uint8_t> jpeg, OutputFormat f, std::span<std::uint8_t> out,
                           const DecodeLimits& limits = {});
std::vector<std::uint8_t> render_decoded(std::span<const std::uint8_t> jpeg, OutputFormat f,
                                         const DecodeLimits& limits = {});

std::vector<std::uint8_t> render_augmented(std::span<const std::uint8_t> jpeg, const PipelineSpec& spec,
                                           RandomSource& rs, OutputFormat f, const AugmentOptions& opts = {});

}  // namespace prepfs::transform

// Runs a pipeline spec on a JPEG: decode, then the ops, drawing randomness from a RandomSource.
//
// Exact path (FastPaths{} = all off): full PIL-equal decode, then each op as torchvision 0.14
// applies it to a PIL image (RandomResizedCrop = crop, then PIL bilinear resize; ...). Given the
// same random draws the output equals torchvision's byte for byte (tested against torchvision).
//
// Fast paths apply to the first op only, where the work is:
//  - crop_decode: decode only the rows and columns the first op reads (rrc, center_crop), using
//    jpeg_crop_scanline + jpeg_skip_scanlines. With the iMCU margin JpegReader adds, the pixels
//    equal a full decode's, and the rest of the file is still read (entropy-decoded, markers
//    checked to EOI), so it fails on exactly the files a full decode fails on: this path is exact
//    in bytes and in errors (tested against PIL on damaged files), and pipeline_key ignores it.
//  - stop_below_crop (with crop_decode): stop reading at the bottom of the crop instead of
//    entropy-decoding the rest. Same pixels (rows never depend on the rows below them), but a file
//    damaged below the crop would pass; so the caller sets it only for bytes it has seen decode
//    to their end without error (store/verified_files.h), and then the errors are the same too.
//  - dct_scale: let libjpeg downscale by 1/2, 1/4 or 1/8 in the DCT domain while the decoded crop
//    stays at least dct_min_ratio times the target size, then resample from the scaled frame with
//    the crop box mapped to scaled (fractional) coordinates. Pixels change slightly.
//    "Statistically equivalent" means here: the same random draws give the same crop box and
//    flip (so outputs can be compared pixel by pixel), the sizes are identical, and the pixels
//    differ little: test_augment.cc requires a mean absolute difference to the exact path of at
//    most 0.5 levels (of 255) over all outputs, at most 2 levels for any single output, and a
//    per-output mean colour shift under 0.5 levels. Measured with dct_min_ratio = 2: 0.18 mean /
//    0.57 worst on the synthetic test images, 0.16 mean on 35 real multi-megapixel photographs
//    (0.57 with dct_min_ratio = 1), 0.01 on ImageNet-sized files (where it rarely applies).
// The random draws never depend on the fast paths, so variant k has the same geometry either way.
#pragma once

#include "prepfs/transform/image.h"
#include "prepfs/transform/jpeg_decode.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/resample.h"
#include "prepfs/transform/rng.h"

#include <cstdint>
#include <span>
#include <vector>

namespace prepfs::transform {

struct FastPaths {
  bool crop_decode = false;
  bool dct_scale = false;
  double dct_min_ratio = 2.0;
  bool stop_below_crop = false;  // only for input known to decode to its end (see above)
};

struct AugmentOptions {
  DecodeLimits limits;
  FastPaths fast;
  ResampleKernel resample = ResampleKernel::kSimd;  // same bytes either way (benchmarks compare)
};

// Refuses (DecodeError kTooLarge) a pipeline whose images, intermediate or final, would exceed
// max_pixels from a width x height source, before any work: resize(16384) of a long thin image
// would otherwise allocate gigabytes. Every render checks it, from the JPEG or from pixels.
void check_sizes(const PipelineSpec& spec, int width, int height, std::uint64_t max_pixels);

// Decode + augment. Throws DecodeError (EIO) for bad input, including a pipeline whose
// intermediate images would exceed limits.max_pixels.
Image augment_jpeg(std::span<const std::uint8_t> jpeg, const PipelineSpec& spec, RandomSource& rs,
                   const AugmentOptions& opts = {});

// The ops alone, exact, on already decoded pixels.
Image apply_ops(Image img, std::span<const Op> ops, RandomSource& rs, ResampleKernel kernel = ResampleKernel::kSimd);
// The same on pixels that stay where they are (a cache entry, say): the first op reads the view,
// so a crop or resize copies only what it keeps.
Image apply_ops(ImageView src, std::span<const Op> ops, RandomSource& rs,
                ResampleKernel kernel = ResampleKernel::kSimd);

// Whether augment_jpeg would decode this variant at a DCT scale (its first op's crop or size, at
// `rng`'s draws, allows it): its bytes then differ from apply_ops on the full-size pixels, so a
// renderer with both at hand must take the JPEG for it, or a variant's bytes would depend on what
// the cache held. rng is a copy: the caller's draws are untouched.
bool decodes_at_dct_scale(const PipelineSpec& spec, int width, int height, Rng rng, const FastPaths& fast);

// Cache-key hash of what determines augmented bytes besides (seed, path, variant): the spec and
// the settings of the fast paths that change pixels (dct_scale; crop_decode does not).
std::uint64_t pipeline_key(const PipelineSpec& spec, const FastPaths& fast);

}  // namespace prepfs::transform

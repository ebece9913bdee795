// The augment pipeline spec: what `-o augment=...` (or `augment =` in the config file) says.
//
// Syntax: ops separated by ';', each NAME(ARGS), whitespace allowed between tokens.
//   SIZE   := N | HxW          one number is a square; H (rows) first, as in torchvision
//   NUMBER := decimal | decimal/decimal    fractions keep 3/4 and 4/3 exact
//   rrc(SIZE[, scale_lo, scale_hi[, ratio_lo, ratio_hi]])
//        RandomResizedCrop(SIZE, scale=(0.08, 1.0), ratio=(3/4, 4/3)) with PIL bilinear;
//        0 < scale_lo <= scale_hi <= 1, 0 < ratio_lo <= ratio_hi
//   resize(N)        Resize(N): the shorter side becomes N (bilinear, antialiased)
//   resize(HxW)      Resize((H, W)): exactly that size (resize(256x256) is not resize(256))
//   center_crop(SIZE)  CenterCrop(SIZE), zero-padded when larger than the image
//   hflip([p])       RandomHorizontalFlip(p), p defaults to 0.5, 0 <= p <= 1
// Sizes are 1..16384. Example: "resize(256); center_crop(224)".
//
// Every op has a deterministic output size, so stat() can give the augmented file size from the
// source dimensions alone (output_size()).
//
// canonical() is the spec with defaults filled in, no whitespace and numbers in their shortest
// round-trip form, so equivalent spellings ("3/4", "0.75") give the same cache keys.
// hash() = XXH3-64(canonical) seeded with kTransformVersion: bump the version whenever the output
// of some spec changes (algorithm, RNG stream), so caches never serve stale variants.
#pragma once

#include "prepfs/transform/crop_sampler.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace prepfs::transform {

// torchvision's training transform before ToTensor:
// RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip(0.5).
inline constexpr std::string_view kDefaultAugmentSpec = "rrc(224,0.08,1,3/4,4/3);hflip(0.5)";
inline constexpr std::uint32_t kTransformVersion = 1;
inline constexpr int kMaxSpecSide = 16384;

struct RrcOp {
  Size size;
  RrcParams params;
};
struct ResizeOp {
  int shorter = 0;  // > 0: the shorter side becomes this; 0: exact `size`
  Size size;
};
struct CenterCropOp {
  Size size;
};
struct HflipOp {
  double p = 0.5;
};
using Op = std::variant<RrcOp, ResizeOp, CenterCropOp, HflipOp>;

class PipelineSpec {
 public:
  // Throws SpecError (EINVAL) with the offset of the problem and what was expected.
  static PipelineSpec parse(std::string_view text);

  const std::vector<Op>& ops() const { return ops_; }
  const std::string& canonical() const { return canonical_; }
  std::uint64_t hash() const { return hash_; }

  // Output size for a width x height source.
  Size output_size(int width, int height) const;

 private:
  std::vector<Op> ops_;
  std::string canonical_;
  std::uint64_t hash_ = 0;
};

// Canonical text of an op list (used by parse; exposed for tests and logging).
std::string canonical_form(const std::vector<Op>& ops);

}  // namespace prepfs::transform

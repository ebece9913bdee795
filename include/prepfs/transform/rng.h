// Randomness for augmentation.
//
// RandomSource is the seam between "which random numbers" and "what to do with them": the crop
// sampler and the flip only ask it for uniform doubles and integers, in the same order as
// torchvision asks torch's generator. A test can therefore replay torchvision's recorded draws
// and must get torchvision's boxes.
//
// Rng is the production source. Variant k of a file must be a pure function of (seed, path, k),
// independent of thread, time and of which variants were made before, so each variant gets its
// own generator: xoshiro256** whose state is expanded by SplitMix64 from
// XXH3-64(seed_le64 || variant_le64 || path). Both are small, fast, well-tested generators; the
// stream format is part of the output, so changing it must bump kTransformVersion (pipeline_spec.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace prepfs::transform {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // Uniform in [lo, hi).
  virtual double uniform(double lo, double hi) = 0;
  // Uniform integer in [lo, hi); requires lo < hi (torch.randint(lo, hi) semantics).
  virtual std::int64_t randint(std::int64_t lo, std::int64_t hi) = 0;
};

class Rng final : public RandomSource {
 public:
  explicit Rng(std::uint64_t seed) noexcept;
  // The generator of variant `variant` of the file at `path` under the mount's `seed`.
  static Rng for_variant(std::uint64_t seed, std::string_view path, std::uint64_t variant) noexcept;

  std::uint64_t next() noexcept;  // 64 random bits
  double uniform01() noexcept;    // [0, 1) with 53 random bits
  double uniform(double lo, double hi) override;
  std::int64_t randint(std::int64_t lo, std::int64_t hi) override;

 private:
  std::uint64_t s_[4];
};

}  // namespace prepfs::transform

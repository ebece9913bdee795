#include "prepfs/core/placer.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>

namespace prepfs {
namespace {

constexpr uint64_t kHashSeed = 0x70726570'66735053ull;  // "prepfsPS": independent of cache keys

uint64_t to_threshold(double fraction) {
  if (!(fraction > 0)) return 0;
  if (fraction >= 1) return UINT64_MAX;
  return static_cast<uint64_t>(std::ldexp(fraction, 64));
}

}  // namespace

uint64_t Placer::sample_hash(std::string_view path) { return XXH3_64bits_withSeed(path.data(), path.size(), kHashSeed); }

void Placer::set(const model::Placement& p, double samples) {
  double cumulative = 0;
  for (size_t i = 0; i < kSlots; i++) {
    const auto t = static_cast<model::Tier>(i / kFormCount);
    const auto f = static_cast<model::Form>(i % kFormCount);
    if (samples > 0) cumulative += std::max(0.0, p.at(f, t)) / samples;
    upper_[i].store(to_threshold(cumulative), std::memory_order_relaxed);
  }
  active_.store(true, std::memory_order_release);
}

std::optional<Slot> Placer::slot_of(uint64_t h) const {
  for (size_t i = 0; i < kSlots; i++)
    if (h < upper_[i].load(std::memory_order_relaxed))
      return Slot{static_cast<Form>(i % kFormCount), static_cast<model::Tier>(i / kFormCount)};
  return std::nullopt;
}

Admission Placer::admission(uint32_t node, Form form) const {
  if (!active_.load(std::memory_order_acquire) || !tree_.dims(node).is_image()) return Admission{};
  std::optional<Slot> s = slot_of(sample_hash(tree_.path(node)));
  if (!s || s->form != form) return Admission::none();
  return Admission{s->tier == model::Tier::kRam, s->tier == model::Tier::kSsd};
}

}  // namespace prepfs

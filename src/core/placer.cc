#include "prepfs/core/placer.h"

#include <sys/stat.h>
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

Placer::Layout Placer::layout_for(const model::Placement& p, double samples) {
  Layout l{};
  double cumulative = 0;
  for (size_t i = 0; i < kSlots; i++) {
    const auto t = static_cast<model::Tier>(i / kFormCount);
    const auto f = static_cast<model::Form>(i % kFormCount);
    if (samples > 0) cumulative += std::max(0.0, p.at(f, t)) / samples;
    l[i] = to_threshold(cumulative);
  }
  return l;
}

std::optional<Slot> Placer::slot_in(const Layout& layout, uint64_t h) {
  for (size_t i = 0; i < kSlots; i++)
    if (h < layout[i]) return Slot{static_cast<Form>(i % kFormCount), static_cast<model::Tier>(i / kFormCount)};
  return std::nullopt;
}

void Placer::set(const model::Placement& p, double samples) {
  const Layout l = layout_for(p, samples);
  for (size_t i = 0; i < kSlots; i++) upper_[i].store(l[i], std::memory_order_relaxed);
  active_.store(true, std::memory_order_release);
}

Placer::Layout Placer::layout() const {
  Layout l{};
  for (size_t i = 0; i < kSlots; i++) l[i] = upper_[i].load(std::memory_order_relaxed);
  return l;
}

std::optional<Slot> Placer::slot_of(uint64_t h) const { return slot_in(layout(), h); }

void Placer::for_each_moved(const Layout& from, const Layout& to,
                            const std::function<void(uint32_t, std::optional<Slot>)>& fn) const {
  for (uint32_t id = 0; id < tree_.size(); id++) {
    if (!S_ISREG(tree_.node(id).mode) || !tree_.dims(id).is_image()) continue;
    const uint64_t h = sample_hash(tree_.path(id));
    std::optional<Slot> a = slot_in(from, h), b = slot_in(to, h);
    const bool same = a.has_value() == b.has_value() && (!a || (a->form == b->form && a->tier == b->tier));
    if (!same) fn(id, a);
  }
}

Admission Placer::admission(uint32_t node, std::string_view path, Form form) const {
  if (!active_.load(std::memory_order_acquire) || !tree_.dims(node).is_image()) return Admission{};
  std::optional<Slot> s = slot_of(sample_hash(path));
  if (!s || s->form != form) return Admission::none();
  return Admission{s->tier == model::Tier::kRam, s->tier == model::Tier::kSsd};
}

}  // namespace prepfs

#include "prepfs/partition/placer.h"

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

uint64_t Placer::sample_hash(std::string_view path) {
  return XXH3_64bits_withSeed(path.data(), path.size(), kHashSeed);
}

Placer::Layout Placer::layout_for(const model::Placement& p, double samples) {
  Layout l{};
  double cumulative = 0;
  for (size_t i = 0; i < kSlots; i++) {
    const auto t = static_cast<Tier>(i / kForms);
    const auto f = static_cast<Form>(i % kForms);
    if (samples > 0) cumulative += std::max(0.0, p.at(f, t)) / samples;
    l[i] = to_threshold(cumulative);
  }
  return l;
}

std::optional<Slot> Placer::slot_in(const Layout& layout, uint64_t h) {
  for (size_t i = 0; i < kSlots; i++)
    if (h < layout[i]) return Slot{static_cast<Form>(i % kForms), static_cast<Tier>(i / kForms)};
  return std::nullopt;
}

void Placer::set(const model::Placement& p, double samples) {
  layout_.store(std::make_shared<const Layout>(layout_for(p, samples)), std::memory_order_release);
}

Placer::Layout Placer::layout() const {
  std::shared_ptr<const Layout> l = layout_.load(std::memory_order_acquire);
  return l ? *l : Layout{};
}

std::optional<Slot> Placer::slot_of(uint64_t h) const {
  std::shared_ptr<const Layout> l = layout_.load(std::memory_order_acquire);
  return l ? slot_in(*l, h) : std::nullopt;
}

Placer::Placement Placer::place(uint64_t h) const {
  std::shared_ptr<const Layout> l = layout_.load(std::memory_order_acquire);
  if (!l) return Placement{};
  Placement p{true, slot_in(*l, h), 0};
  uint64_t lower = 0;
  for (size_t i = 0; i < kSlots; i++) {
    if ((*l)[i] > lower) p.held |= uint8_t(1u << i);
    lower = std::max(lower, (*l)[i]);
  }
  return p;
}

void Placer::for_each_moved(const Layout& from, const Layout& to,
                            const std::function<void(uint32_t, std::optional<Slot>, std::optional<Slot>)>& fn) const {
  for_each_sample(tree_, shapes_, [&](uint32_t id) {
    const uint64_t h = sample_hash(tree_.path(id));
    std::optional<Slot> a = slot_in(from, h), b = slot_in(to, h);
    if (a != b) fn(id, a, b);
  });
}

}  // namespace prepfs

// Which samples the partition keeps in which (form, tier). A plan gives counts n(f,t); the placer
// turns them into intervals of a hash of each sample's path: a sample is kept in form f in tier t
// when its hash falls in (f,t)'s interval. So each sample has at most one cached form (the
// model's assumption 2, docs/MODEL.md), no per-sample table is needed, the choice survives a
// restart (the SSD tier's entries stay the assigned ones), and a new plan reassigns only the
// samples whose hash lies between an old and a new boundary. Files that are not samples (labels,
// metadata) have no slot: the store admits them everywhere, as without a plan.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "prepfs/common/forms.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/index/tree.h"
#include "prepfs/model/partition.h"

namespace prepfs {

struct Slot {
  Form form;
  Tier tier;
  bool operator==(const Slot&) const = default;
};

class Placer {
 public:
  static constexpr size_t kSlots = kForms * kTiers;
  // Upper bounds of the cumulative hash intervals, slots ordered RAM (raw, decoded, augmented),
  // then SSD (the same): a sample with hash h is in the first slot whose bound exceeds h.
  using Layout = std::array<uint64_t, kSlots>;
  static Layout layout_for(const model::Placement& p, double samples);
  static std::optional<Slot> slot_in(const Layout& layout, uint64_t sample_hash);

  Placer(const Tree& tree, const SampleShapes& shapes) : tree_(tree), shapes_(shapes) {}

  // The placement to enforce, for `samples` samples (the sample count the plan was made for).
  // Readers racing a set() see the old layout or the new one whole, never a mix.
  void set(const model::Placement& p, double samples);

  // False until the first set(): then every fill is kept everywhere.
  bool active() const { return layout_.load(std::memory_order_acquire) != nullptr; }
  // The slot of a sample by its hash (nullopt: kept in no form, or no plan yet).
  std::optional<Slot> slot_of(uint64_t sample_hash) const;
  // Both at once, from one look at the layout: whether a plan is enforced, and the slot.
  struct Placement {
    bool active = false;
    std::optional<Slot> slot;
    uint8_t held = 0;  // bit form + 3 * tier: the plan gives (form, tier) room for some samples
  };
  Placement place(uint64_t sample_hash) const;
  static uint64_t sample_hash(std::string_view path);

  // Whether a sample kept decoded in RAM keeps its variant of the moment there too (the plan's
  // model::Inputs::variant_beside_pixels, which gave the augmented RAM share that room). The
  // Planner publishes it with each enforced plan so that the store admits exactly what was planned.
  void set_variant_beside_pixels(bool on) { beside_.store(on, std::memory_order_release); }
  bool variant_beside_pixels() const { return beside_.load(std::memory_order_acquire); }

  Layout layout() const;  // all zero before the first set()
  // Every sample whose slot differs between two layouts, with the slot it had in `from` and the
  // one it has in `to` (each nullopt for none).
  void for_each_moved(
      const Layout& from, const Layout& to,
      const std::function<void(uint32_t node, std::optional<Slot> was, std::optional<Slot> is)>& fn) const;

 private:
  const Tree& tree_;
  const SampleShapes& shapes_;
  std::atomic<std::shared_ptr<const Layout>> layout_;
  std::atomic<bool> beside_{false};
};

}  // namespace prepfs

// Which samples the partition keeps in which (form, tier). A plan gives counts n(f,t); the placer
// turns them into intervals of a hash of each sample's path: a sample is admitted in form f to
// tier t when its hash falls in (f,t)'s interval. So each sample has at most one cached form (the
// model's assumption 2, docs/MODEL.md), no per-sample table is needed, the choice survives a
// restart (the SSD tier's entries stay the assigned ones), and a new plan reassigns only the
// samples whose hash lies between an old and a new boundary. Files that are not images (labels,
// metadata) are not samples: both tiers admit them, as without a plan.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "prepfs/cache/key.h"
#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/tree.h"
#include "prepfs/model/partition.h"

namespace prepfs {

struct Slot {
  Form form;
  model::Tier tier;
};

class Placer {
 public:
  static constexpr size_t kSlots = kFormCount * model::kTiers;
  // Upper bounds of the cumulative hash intervals, slots ordered RAM (raw, decoded, augmented),
  // then SSD (the same): a sample with hash h is in the first slot whose bound exceeds h.
  using Layout = std::array<uint64_t, kSlots>;
  static Layout layout_for(const model::Placement& p, double samples);
  static std::optional<Slot> slot_in(const Layout& layout, uint64_t sample_hash);

  explicit Placer(const Tree& tree) : tree_(tree) {}

  // The placement to enforce, for `samples` samples (the image count the plan was made for).
  // Safe to call while readers ask for admissions: each threshold is one atomic.
  void set(const model::Placement& p, double samples);

  // Where a fill of `form` of `node` may be kept. Before the first set(), and for files that are
  // not images, everywhere.
  Admission admission(uint32_t node, Form form) const { return admission(node, tree_.path(node), form); }
  // The same when the caller already holds the node's path (the read path builds it once).
  Admission admission(uint32_t node, std::string_view path, Form form) const;

  // The slot of a sample by its hash (nullopt: not cached in any form).
  std::optional<Slot> slot_of(uint64_t sample_hash) const;
  static uint64_t sample_hash(std::string_view path);

  Layout layout() const;
  // Every image whose slot differs between two layouts, with the slot it had in `from` (if any).
  void for_each_moved(const Layout& from, const Layout& to,
                      const std::function<void(uint32_t node, std::optional<Slot> was)>& fn) const;

 private:
  const Tree& tree_;
  std::atomic<bool> active_{false};
  std::array<std::atomic<uint64_t>, kSlots> upper_{};
};

}  // namespace prepfs

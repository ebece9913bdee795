#include "prepfs/index/sample_list.h"

#include <algorithm>

namespace prepfs {

SampleList::SampleList(const Tree& tree, const SampleShapes& shapes) {
  for_each_sample(tree, shapes, [&](uint32_t node) { nodes_.push_back(node); });
}

std::optional<uint32_t> SampleList::index_of(uint32_t node) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), node);
  if (it == nodes_.end() || *it != node) return std::nullopt;
  return static_cast<uint32_t>(it - nodes_.begin());
}

}  // namespace prepfs

// The samples of the index in one fixed order: sample i is the i-th file that is a sample
// (index/sample_shapes.h) in node order. Jobs name samples by this index (.prepfs/samples lists
// them, .prepfs/resident and .prepfs/importance use it); the daemon works with node ids.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "prepfs/index/sample_shapes.h"
#include "prepfs/index/tree.h"

namespace prepfs {

class SampleList {
 public:
  SampleList(const Tree& tree, const SampleShapes& shapes);

  size_t size() const { return nodes_.size(); }
  uint32_t node(size_t index) const { return nodes_[index]; }
  // The sample index of a node; nullopt when the node is not a sample.
  std::optional<uint32_t> index_of(uint32_t node) const;

 private:
  std::vector<uint32_t> nodes_;  // ascending node ids, so index_of is a binary search
};

}  // namespace prepfs

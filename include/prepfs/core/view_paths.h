// Paths relative to the mount, in any view, to and from index nodes: "raw/a/x.JPEG" is node x
// read raw; "decoded/a/x.ppm" and "augmented/a/x.ppm" are the same node read in those forms.
// The jobs' order files name accesses this way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "prepfs/common/forms.h"
#include "prepfs/core/image_names.h"
#include "prepfs/index/tree.h"

namespace prepfs {

class ViewPaths {
 public:
  ViewPaths(const Tree& tree, const ImageNames& names) : tree_(tree), names_(names) {}

  struct Target {
    uint32_t node;
    Form form;
  };
  // nullopt when the path names nothing (or a directory) in its view.
  std::optional<Target> resolve(std::string_view mount_relative) const;
  // The node's path under decoded/ and augmented/ (relative to the view root); nullopt when those
  // views do not show it (an earlier sibling takes its name, or the name is unusable there).
  std::optional<std::string> image_path(uint32_t node) const;

 private:
  const Tree& tree_;
  const ImageNames& names_;
};

}  // namespace prepfs

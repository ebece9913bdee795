// The readdir offset scheme every view uses: offset 0 is ".", 1 is "..", 2 + i is entry i. A
// hidden entry keeps its offset (the listing stays stable while entries are skipped), and each
// emitted entry carries the offset of the next one, so a listing resumes where the kernel's
// buffer filled up.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "prepfs/core/filesystem.h"

namespace prepfs {

struct DirEntry {
  std::string name;
  Attr attr;
};

// entry(i) gives entry i of count, or nullopt when it is hidden in this view.
void list_dir(uint64_t offset, const Attr& self, const std::function<Attr()>& parent, uint64_t count,
              const std::function<std::optional<DirEntry>(uint64_t i)>& entry, const Filesystem::DirEmit& emit);

}  // namespace prepfs

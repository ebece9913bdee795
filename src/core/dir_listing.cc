#include "prepfs/core/dir_listing.h"

namespace prepfs {

void list_dir(uint64_t offset, const Attr& self, const std::function<Attr()>& parent, uint64_t count,
              const std::function<std::optional<DirEntry>(uint64_t i)>& entry, const Filesystem::DirEmit& emit) {
  for (uint64_t off = offset; off < 2 + count; off++) {
    bool more = true;
    if (off == 0) {
      more = emit(".", self, 1);
    } else if (off == 1) {
      more = emit("..", parent(), 2);
    } else if (std::optional<DirEntry> e = entry(off - 2)) {
      more = emit(e->name, e->attr, off + 1);
    }
    if (!more) return;
  }
}

}  // namespace prepfs

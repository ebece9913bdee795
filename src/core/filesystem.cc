#include "prepfs/core/filesystem.h"

#include <cerrno>

#include "prepfs/common/error.h"

namespace prepfs {

size_t Filesystem::write(uint64_t, uint64_t, uint64_t, std::string_view) {
  throw Error(EROFS, "read-only file system");
}

Attr Filesystem::truncate(uint64_t, uint64_t) { throw Error(EROFS, "read-only file system"); }

}  // namespace prepfs

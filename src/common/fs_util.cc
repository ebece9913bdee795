#include "prepfs/common/fs_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>

#include "prepfs/common/error.h"

namespace prepfs {

void mkdir_p(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++) {
    if (i == path.size() || path[i] == '/') {
      std::string cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(errno, "cannot create " + cur);
    }
  }
}

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace prepfs

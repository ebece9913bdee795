// A running mount: the daemon's three namespaces as three FUSE sessions, mounted in order (the
// main tree, then augmented/ and .prepfs/ over its empty directories) and unmounted the other way.
#pragma once

#include <memory>
#include <string>

#include "prepfs/common/options.h"
#include "prepfs/daemon/daemon.h"

namespace prepfs {

// A mountpoint must exist, be a directory and have nothing mounted on it. Returns its absolute
// path; each problem is one clear Error. A dead prepfs mount there (its daemon died without
// unmounting) is detached first, so a restart mounts again.
std::string check_mountpoint(const std::string& mnt);

class Mount {
 public:
  // Mounts and returns once the mount answers requests. On an exception whatever was mounted is
  // unmounted again.
  static std::unique_ptr<Mount> start(Daemon& daemon, const Options& opts);
  virtual ~Mount() = default;
  virtual void stop() = 0;  // unmounts the three sessions (control, augmented, main)
};

}  // namespace prepfs

// A running prepfs mount: the source, its index, the cache tiers and the two FUSE sessions
// (the main tree, and .prepfs/ mounted over it), assembled from Options.
#pragma once

#include <memory>
#include <string>

#include "prepfs/common/options.h"

namespace prepfs {

class Mount {
 public:
  // Validates everything the user gave (each problem becomes one clear Error), builds the
  // layers and mounts. Returns once the mount answers requests.
  static std::unique_ptr<Mount> start(const Options& opts);
  virtual ~Mount() = default;
  virtual void stop() = 0;  // unmounts both sessions and flushes queued SSD writes
  virtual std::string summary() const = 0;  // one line for the log and sd_notify STATUS=
};

// Where this source's cache and index live: ssd_dir/<hash of the source identity>.
std::string cache_dir_for(const std::string& ssd_dir, const std::string& source_identity);

}  // namespace prepfs

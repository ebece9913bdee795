// Revalidation under metadata_ttl, for every view: is a file's source version still the one the
// tree holds? Checked at most once per TTL per file (at once after a read error). A changed file
// gets its new version, mode, owner and header in the tree, and every view that listens is told
// its old version (each pushes the inodes whose kernel attributes and pages must go). Without a
// TTL (an immutable source) it does nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "prepfs/common/stats.h"
#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"

namespace prepfs {

class FileRevalidator {
 public:
  using Changed = std::function<void(uint32_t node, const FileVersion& old)>;
  // metadata_ttl: seconds; < 0: the source is immutable, never revalidate.
  FileRevalidator(Tree& tree, Source& source, ViewCounters& counters, double metadata_ttl);

  bool enabled() const { return validated_at_ != nullptr; }
  // A view's listener, told of each change (before serving starts; it must outlive this).
  void on_change(Changed changed);
  // A stat of the source when the file's TTL has run out, or `force`; errors are logged (the
  // tree keeps the old version, and reads of it answer EIO until a later check succeeds).
  void maybe_revalidate(uint32_t node, bool force);

 private:
  Tree& tree_;
  Source& source_;
  ViewCounters& counters_;
  const double ttl_;
  std::mutex listeners_mu_;
  std::vector<Changed> listeners_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unique_ptr<std::atomic<int64_t>[]> validated_at_;  // ms since start_ (+1), only with a TTL
};

}  // namespace prepfs

#include "prepfs/core/file_revalidator.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "prepfs/common/error.h"
#include "prepfs/index/image_probe.h"

namespace prepfs {

FileRevalidator::FileRevalidator(Tree& tree, Source& source, ViewCounters& counters, double metadata_ttl)
    : tree_(tree), source_(source), counters_(counters), ttl_(metadata_ttl) {
  if (ttl_ < 0) return;
  validated_at_.reset(new std::atomic<int64_t>[tree_.size()]);
  for (size_t i = 0; i < tree_.size(); i++) validated_at_[i].store(0, std::memory_order_relaxed);
}

void FileRevalidator::on_change(Changed changed) {
  std::lock_guard lock(listeners_mu_);
  listeners_.push_back(std::move(changed));
}

void FileRevalidator::maybe_revalidate(uint32_t id, bool force) {
  if (!validated_at_ || id >= tree_.size() || !S_ISREG(tree_.mode(id))) return;
  // Milliseconds since start, +1 so that 0 means "never validated".
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_).count() + 1;
  const int64_t last = validated_at_[id].load(std::memory_order_relaxed);
  if (!force && last != 0 && double(now_ms - last) < ttl_ * 1000.0) return;
  validated_at_[id].store(now_ms, std::memory_order_relaxed);
  bump(counters_.revalidations);
  const std::string path = tree_.path(id);
  try {
    // The tree's version is read before the stat and replaced only if still that one: two
    // revalidations of one file may overlap (a TTL check and a read error's), and the one that
    // commits last must not install the older stat. The loser stats again; a third overlap in a
    // row is left to the next check.
    for (int attempt = 0; attempt < 3; attempt++) {
      const FileVersion old = tree_.version(id);
      const SourceStat st = source_.stat(path);
      const FileVersion now = version_of(st);
      if (now == old || !S_ISREG(st.mode)) return;
      // The header again: a resized image has other dimensions, hence other decoded/ and
      // augmented/ sizes. If that read fails the old version stays, and reads keep answering EIO
      // until a later revalidation succeeds.
      const Tree::FileState state{now, probe_image(source_, path, now), st.mode, st.owner};
      if (!tree_.replace_file_state(id, old, state)) continue;
      bump(counters_.changed_files);
      spdlog::info("source file {} changed (size {} -> {}); serving the new version", path, old.size, st.size);
      std::lock_guard lock(listeners_mu_);
      for (const Changed& changed : listeners_) changed(id, old);
      return;
    }
  } catch (const Error& e) {
    spdlog::warn("revalidating {}: {}", path, e.what());
  }
}

}  // namespace prepfs

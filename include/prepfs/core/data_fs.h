// The main tree of a mount:
//   /            the mount root
//   /raw/...       byte-identical mirror of the source, served through the cache tiers
//   /decoded/...   every JPEG as X.ppm (or .npy), decoded exactly as PIL does; cached
//   /augmented     an empty directory; the augmented session (augmented_fs) is mounted over it
//   /.prepfs       an empty directory; the control session (control_fs) is mounted over it
// Inode numbers encode the view in the high 32 bits and the tree node in the low 32 bits, so
// lookups need no table and inode numbers are stable for the life of the mount.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/core/image_names.h"
#include "prepfs/core/placer.h"
#include "prepfs/core/sample_renderer.h"
#include "prepfs/core/tree.h"
#include "prepfs/source/source.h"

namespace prepfs {

struct DataFsConfig {
  double metadata_ttl = -1;         // seconds; <0: the source is immutable, never revalidate
  uint64_t chunk_size = 1ull << 20; // cache granularity for file contents
};

struct DataFsCounters {
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> read_errors{0};
  std::atomic<uint64_t> revalidations{0};
  std::atomic<uint64_t> changed_files{0};
  // Samples requested per view (the profiler's request mix): reads at offset 0 of an image file.
  // raw/ counts only what reaches the daemon: a read the page cache answers is not seen.
  std::atomic<uint64_t> raw_samples{0};
  std::atomic<uint64_t> decoded_samples{0};
};

class DataFs final : public Filesystem {
 public:
  static constexpr uint64_t kRootIno = 1;
  static constexpr uint64_t kControlDirIno = 2;
  static constexpr uint64_t kAugmentedDirIno = 3;
  static constexpr const char* kControlDirName = ".prepfs";
  static constexpr const char* kAugmentedDirName = "augmented";
  static constexpr const char* kRawDirName = "raw";
  static constexpr const char* kDecodedDirName = "decoded";

  // renderer may be null: then decoded/ is not offered (tests of raw/ alone).
  DataFs(Source& source, Tree& tree, TierManager& cache, SampleRenderer* renderer, const DataFsConfig& cfg);

  Attr getattr(uint64_t ino) override;
  Attr lookup(uint64_t parent, std::string_view name) override;
  void readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) override;
  std::string readlink(uint64_t ino) override;
  OpenReply open(uint64_t ino, int flags) override;
  std::vector<Slice> read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) override;
  void release(uint64_t, uint64_t) override {}
  FsStat statfs() override;

  // Called (from any thread) with inodes whose cached pages the kernel must drop because their
  // source file changed. The FUSE adaptor forwards them to the kernel asynchronously.
  void set_invalidator(std::function<void(uint64_t ino)> fn) { invalidate_ = std::move(fn); }

  // The partition's placement decides where raw chunks of images are kept (null: everywhere).
  void set_placer(const Placer* placer) { placer_ = placer; }

  const Tree& tree() const { return tree_; }
  const DataFsCounters& counters() const { return counters_; }
  enum View : uint64_t { kRaw = 1, kDecoded = 2 };
  static uint64_t ino_of(View v, uint32_t node) { return (uint64_t(v) << 32) | node; }
  static uint64_t raw_ino(uint32_t node) { return ino_of(kRaw, node); }

 private:
  // Splits a tree inode into (view, node); throws ENOENT for anything else.
  std::pair<View, uint32_t> node_of(uint64_t ino) const;
  uint32_t raw_node(uint64_t ino) const;  // throws ENOENT unless a raw/ inode
  Attr node_attr(View v, uint32_t id);
  std::vector<Slice> read_raw(uint32_t id, uint64_t off, size_t size);
  Attr dir_attr(uint64_t ino) const;
  void maybe_revalidate(uint32_t id, bool force);
  double timeout() const;

  Source& source_;
  Tree& tree_;  // owned by the mount; revalidation updates file versions
  TierManager& cache_;
  SampleRenderer* renderer_;
  const Placer* placer_ = nullptr;
  std::unique_ptr<ImageNames> names_;
  DataFsConfig cfg_;
  DataFsCounters counters_;
  std::function<void(uint64_t)> invalidate_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unique_ptr<std::atomic<int64_t>[]> validated_at_;  // ms since start_ (+1), only with a TTL
  int64_t mount_time_ns_;
};

}  // namespace prepfs

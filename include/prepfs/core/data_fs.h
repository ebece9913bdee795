// The main tree of a mount:
//   /            the mount root
//   /raw/...       byte-identical mirror of the source, served through the cache tiers
//   /decoded/...   every JPEG as X.ppm (or .npy), decoded exactly as PIL does; cached
//   /augmented     an empty directory; the augmented session (augmented_fs) is mounted over it
//   /.prepfs       an empty directory; the control session (control_fs) is mounted over it
// Inode numbers encode the tree node in the low 32 bits, the view in the next 2 and, with
// metadata_ttl, a 30-bit tag of the file's version in the top 30: lookups need no table, inode
// numbers are stable while a file is unchanged, and a new version of a file is a new inode, so
// the kernel never mixes two versions' pages in one file. Bytes come from
// the SampleStore; this class only maps the namespace onto it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "prepfs/common/stats.h"
#include "prepfs/core/file_revalidator.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/core/image_names.h"
#include "prepfs/core/invalidations.h"
#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"
#include "prepfs/store/header_prober.h"
#include "prepfs/store/sample_store.h"

namespace prepfs {

struct DataFsConfig {
  double metadata_ttl = -1;  // seconds; <0: the source is immutable, never revalidate
  bool image_views = true;   // offer decoded/ and augmented/ (off: raw/ alone)
  Owner unowned = {};        // shown for entries the source has no owner for (S3): uid=/gid=
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

  // Revalidation (metadata_ttl) updates file versions in tree and pushes the inodes whose kernel
  // pages must go to `invalidations`.
  // prober (may be null: every header known) reads headers the image views need and a first
  // mount did not wait for.
  DataFs(Tree& tree, Source& source, SampleStore& store, ViewCounters& counters, Invalidations& invalidations,
         const DataFsConfig& cfg, HeaderProber* prober = nullptr);

  Attr getattr(uint64_t ino) override;
  Attr lookup(uint64_t parent, std::string_view name) override;
  void readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) override;
  std::string readlink(uint64_t ino) override;
  OpenReply open(uint64_t ino, int flags) override;
  std::vector<Slice> read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) override;
  void release(uint64_t, uint64_t) override {}
  FsStat statfs() override;

  const Tree& tree() const { return tree_; }
  // The mount's revalidation (metadata_ttl), which augmented/ shares.
  FileRevalidator& revalidator() { return revalidator_; }
  enum View : uint64_t { kRaw = 1, kDecoded = 2 };

 private:
  static constexpr uint64_t kViewMask = 3;
  static constexpr int kTagShift = 34;
  static constexpr uint64_t kTagMask = (1ull << (64 - kTagShift)) - 1;
  struct Inode {
    View view;
    uint32_t node;
    uint64_t tag;  // of the version the inode was handed out for
  };
  // Splits a tree inode into its parts; throws ENOENT for anything else.
  Inode node_of(uint64_t ino) const;
  uint64_t ino_of(View v, uint32_t node, const FileVersion& version) const;
  uint64_t version_tag(uint32_t node, const FileVersion& v) const;  // 0 for directories, or without a TTL
  uint32_t raw_node(uint64_t ino) const;                            // throws ENOENT unless a raw/ inode
  Attr node_attr(View v, uint32_t id);
  std::vector<Slice> read_raw(const Sample& s, uint64_t off, size_t size);
  std::vector<Slice> read_decoded(const Sample& s, uint64_t off, size_t size);
  Attr dir_attr(uint64_t ino) const;
  double timeout() const;

  Tree& tree_;
  Source& source_;
  SampleStore& store_;
  ViewCounters& counters_;
  Invalidations& invalidations_;
  HeaderProber* prober_;
  std::unique_ptr<ImageNames> names_;  // null without image views
  DataFsConfig cfg_;
  FileRevalidator revalidator_;
  int64_t mount_time_ns_;
};

}  // namespace prepfs

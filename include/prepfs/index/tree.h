// The source's namespace, scanned once and kept compact: one 48-byte node per entry plus its
// name in a shared arena. Children of a directory are contiguous and sorted by name, so lookup
// is a binary search and readdir a slice. Node ids are stable for the life of a mount.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prepfs/common/seqlock.h"
#include "prepfs/index/owner_table.h"
#include "prepfs/source/source.h"

namespace prepfs {

// size, mtime_ns and identity form the file's version (FileVersion); with the permission bits of
// mode and the owner, revalidation rewrites them under the tree's seqlock: read them through
// Tree::file_state() (or version(), mode(), owner()), never one by one.
struct Node {
  uint32_t parent;    // the root is its own parent
  uint32_t name_off;  // into the name arena
  uint32_t mode;      // st_mode (the type never changes)
  uint16_t name_len;
  uint16_t owner;  // index into the tree's OwnerTable
  uint64_t size;   // files: bytes; symlinks: target length
  int64_t mtime_ns;
  uint64_t identity;     // FileVersion::identity (device, inode, ctime)
  uint32_t first_child;  // dirs: first child id; symlinks: target offset in the arena
  uint32_t nchildren;    // dirs: child count
};
static_assert(sizeof(Node) == 48);

// Image dimensions of a file, from its header; {0, 0} for anything that is not a servable JPEG,
// and unprobed() while its header has not been read yet (a first mount probes lazily).
struct ImageDims {
  uint32_t width = 0;
  uint32_t height = 0;
  bool is_image() const { return width != 0 && height != 0; }
  static constexpr ImageDims unprobed() { return {UINT32_MAX, 0}; }
  bool known() const { return !(width == UINT32_MAX && height == 0); }
  bool operator==(const ImageDims&) const = default;
};
static_assert(sizeof(ImageDims) == 8);

class Tree {
 public:
  static constexpr uint32_t kRoot = 0;

  // Scans the whole source (one listing of every directory).
  static Tree scan(Source& source);

  // The wall-clock time (CLOCK_REALTIME, ns) at which scan() began, 0 for a tree read from an
  // index. A directory whose mtime is this recent may have changed after it was listed within the
  // same timestamp tick, which its fingerprint cannot show: encode_index() never trusts it.
  int64_t scanned_at_ns() const { return scanned_at_ns_; }

  size_t size() const { return nodes_.size(); }
  const Node& node(uint32_t id) const { return nodes_[id]; }
  std::string_view name(uint32_t id) const;
  std::string path(uint32_t id) const;  // relative, "" for the root
  std::string_view symlink_target(uint32_t id) const;
  std::optional<uint32_t> lookup(uint32_t dir, std::string_view name) const;
  bool is_dir(uint32_t id) const;
  uint32_t mode(uint32_t id) const { return relaxed_load(nodes_[id].mode); }
  Owner owner(uint32_t id) const { return file_state(id).owner; }

  // A file's version, read whole: never half of an update that revalidation makes concurrently.
  FileVersion version(uint32_t id) const { return file_state(id).version; }
  void set_version(uint32_t id, const FileVersion& v) {
    FileState s = file_state(id);
    s.version = v;
    set_file_state(id, s);
  }

  // Image dimensions, filled by probe_images() (index/image_probe.h) or one file at a time as
  // headers are read (set_dims, from any thread). Empty until probed.
  ImageDims dims(uint32_t id) const { return file_state(id).dims; }
  // Every regular file's dimensions are known (none unprobed).
  bool probed() const;
  const std::vector<ImageDims>& all_dims() const { return dims_; }
  void set_all_dims(std::vector<ImageDims> d);
  // Records one file's header, read from version `of`; safe while readers run. Nothing changes
  // when the file is at another version by now (a revalidation replaced it while the header was
  // read): those dimensions are not the new version's, and writing the whole state back would
  // undo the revalidation.
  void set_dims(uint32_t id, const FileVersion& of, ImageDims d);
  // Regular files whose header is still to be read (a first mount that probes lazily).
  uint64_t unprobed_count() const;

  // A file's version and the dimensions probed from it, read or replaced as one (revalidation
  // replaces both while readers run; a reader never pairs a new version with old dimensions).
  struct FileState {
    FileVersion version;
    ImageDims dims;
    uint32_t mode = 0;  // st_mode; only its permission bits are ever replaced
    Owner owner = {};
  };
  FileState file_state(uint32_t id) const;
  void set_file_state(uint32_t id, const FileState& s);
  // set_file_state only while the file is still at version `expected`; false when another
  // writer replaced it first (two revalidations of one file: the later commit must not be an
  // older stat).
  bool replace_file_state(uint32_t id, const FileVersion& expected, const FileState& s);

  uint64_t memory_bytes() const;  // what the index costs in RAM
  // Counted once when the tree is built or probed: stats and metrics read them on every scrape.
  uint64_t file_count() const { return file_count_; }
  uint64_t image_count() const { return relaxed_load(image_count_); }

  // For the persisted index (index_format.cc).
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::string& arena() const { return arena_; }
  std::vector<Owner> owners() const { return owners_->all(); }
  // Throws Error(EIO) naming the first broken rule unless the parts form a tree scan() could
  // have built (tree_check.cc): ids in range, parents before children, every name a single path
  // component inside the arena, children sorted, dims (empty: not probed) only on files; owners
  // are the table the nodes' owner indices refer to.
  static Tree from_parts(std::vector<Node> nodes, std::string arena, std::vector<ImageDims> dims,
                         const std::vector<Owner>& owners = {});

 private:
  void store_dims(uint32_t id, ImageDims d);  // under the file's write lock
  void store_file_state(uint32_t id, const FileState& s);  // under the file's write lock
  std::vector<Node> nodes_;
  std::string arena_;
  std::vector<ImageDims> dims_;  // parallel to nodes_ once probed
  std::unique_ptr<OwnerTable> owners_ = std::make_unique<OwnerTable>();
  std::unique_ptr<StripedSeqlock> versions_lock_ = std::make_unique<StripedSeqlock>();
  uint64_t file_count_ = 0;
  uint64_t image_count_ = 0;     // read and updated through atomic_ref (set_dims)
  uint64_t unprobed_count_ = 0;  // likewise
  int64_t scanned_at_ns_ = 0;
  void count_files();
};

}  // namespace prepfs

#include "prepfs/core/data_fs.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/core/dir_listing.h"

namespace prepfs {
namespace {

constexpr double kImmutableTimeout = 86400.0;  // the tree never changes: let the kernel keep it
static_assert(Owner::kUnknown == Attr::kMountingUser, "an owner still unknown is the mounting user's");

}  // namespace

DataFs::DataFs(Tree& tree, Source& source, SampleStore& store, ViewCounters& counters, Invalidations& invalidations,
               const DataFsConfig& cfg, HeaderProber* prober)
    : tree_(tree),
      source_(source),
      store_(store),
      counters_(counters),
      invalidations_(invalidations),
      prober_(prober),
      cfg_(cfg),
      revalidator_(tree, source, counters, cfg.metadata_ttl),
      mount_time_ns_(wall_clock_ns()) {
  if (cfg_.image_views) names_ = std::make_unique<ImageNames>(tree_, transform::extension(store_.shapes().format));
  // The new version is a new inode (its number carries the version's tag): lookups after the
  // entry timeout find it. The old inodes' pages go; their handles read EIO from now on.
  revalidator_.on_change([this](uint32_t id, const FileVersion& old) {
    invalidations_.push(ino_of(kRaw, id, old));
    if (names_) invalidations_.push(ino_of(kDecoded, id, old));
  });
}

double DataFs::timeout() const { return cfg_.metadata_ttl < 0 ? kImmutableTimeout : cfg_.metadata_ttl; }

DataFs::Inode DataFs::node_of(uint64_t ino) const {
  uint64_t view = (ino >> 32) & kViewMask, node = ino & 0xffffffffu;
  if ((view != kRaw && !(view == kDecoded && names_)) || node >= tree_.size()) throw Error(ENOENT, "no such inode");
  return Inode{static_cast<View>(view), static_cast<uint32_t>(node), ino >> kTagShift};
}

uint64_t DataFs::ino_of(View v, uint32_t node, const FileVersion& version) const {
  return (version_tag(node, version) << kTagShift) | (uint64_t(v) << 32) | node;
}

uint32_t DataFs::raw_node(uint64_t ino) const {
  Inode in = node_of(ino);
  if (in.view != kRaw) throw Error(ENOENT, "no such inode");
  return in.node;
}

Attr DataFs::dir_attr(uint64_t ino) const {
  Attr a;
  a.ino = ino;
  a.mode = S_IFDIR | 0555;
  a.nlink = 2;
  a.mtime_ns = mount_time_ns_;
  a.timeout = kImmutableTimeout;
  return a;
}

Attr DataFs::node_attr(View view, uint32_t id) {
  revalidator_.maybe_revalidate(id, false);
  // A decoded/ file's size follows from its header, which a first mount may not have read yet.
  if (view == kDecoded && prober_ && S_ISREG(tree_.mode(id))) prober_->ensure(id);
  const Tree::FileState state = tree_.file_state(id);
  const FileVersion& v = state.version;
  Attr a;
  a.ino = ino_of(view, id, v);
  a.mode = state.mode;
  a.size = S_ISDIR(state.mode) ? 0 : v.size;
  if (view == kDecoded && S_ISREG(state.mode)) {
    a.mode = S_IFREG | (state.mode & 0444);  // derived files are read-only whatever the source says
    a.size = store_.shapes().decoded_size(state.dims);
  }
  a.mtime_ns = v.mtime_ns;
  a.nlink = S_ISDIR(state.mode) ? 2 : 1;
  a.timeout = timeout();
  const Owner owner = state.owner.or_else(cfg_.unowned);  // derived views keep the source's
  a.uid = owner.uid;
  a.gid = owner.gid;
  return a;
}

Attr DataFs::getattr(uint64_t ino) {
  if (ino == kRootIno || ino == kControlDirIno || ino == kAugmentedDirIno) return dir_attr(ino);
  Inode in = node_of(ino);
  Attr a = node_attr(in.view, in.node);
  a.ino = ino;  // an inode of an older version keeps its number (a handle open on it fstat()s it)
  return a;
}

Attr DataFs::lookup(uint64_t parent, std::string_view name) {
  if (parent == kRootIno) {
    if (name == kRawDirName) return node_attr(kRaw, Tree::kRoot);
    if (name == kDecodedDirName && names_) return node_attr(kDecoded, Tree::kRoot);
    if (name == kControlDirName) return dir_attr(kControlDirIno);
    if (name == kAugmentedDirName && names_) return dir_attr(kAugmentedDirIno);
    throw Error(ENOENT, "no such entry");
  }
  if (parent == kControlDirIno || parent == kAugmentedDirIno) throw Error(ENOENT, "no such entry");
  auto [view, dir, tag] = node_of(parent);
  if (view == kDecoded && prober_) prober_->ensure_dir(dir);  // names in decoded/ depend on headers
  if (view != kRaw) return node_attr(view, names_->find(dir, name));
  auto child = tree_.lookup(dir, name);
  if (!child) throw Error(ENOENT, "no such entry");
  return node_attr(view, *child);
}

void DataFs::readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) {
  if (ino == kRootIno) {
    std::vector<DirEntry> fixed = {{kControlDirName, dir_attr(kControlDirIno)}};
    if (names_) {
      fixed.push_back({kAugmentedDirName, dir_attr(kAugmentedDirIno)});
      fixed.push_back({kDecodedDirName, node_attr(kDecoded, Tree::kRoot)});
    }
    fixed.push_back({kRawDirName, node_attr(kRaw, Tree::kRoot)});
    list_dir(
        offset, dir_attr(kRootIno), [&] { return dir_attr(kRootIno); }, fixed.size(),
        [&](uint64_t i) { return std::optional<DirEntry>(fixed[i]); }, emit);
    return;
  }
  if (ino == kControlDirIno || ino == kAugmentedDirIno) {
    list_dir(
        offset, dir_attr(ino), [&] { return dir_attr(kRootIno); }, 0, nullptr, emit);
    return;
  }
  auto [view, id, tag] = node_of(ino);
  if (!tree_.is_dir(id)) throw Error(ENOTDIR, "not a directory");
  if (view == kDecoded && prober_) prober_->ensure_dir(id);
  const Node& d = tree_.node(id);
  // Children a view hides (non-images in decoded/) are skipped but keep their offsets.
  list_dir(
      offset, getattr(ino),
      [&, v = view] { return id == Tree::kRoot ? dir_attr(kRootIno) : getattr(ino_of(v, d.parent, {})); }, d.nchildren,
      [&, v = view](uint64_t i) -> std::optional<DirEntry> {
        const uint32_t child = d.first_child + static_cast<uint32_t>(i);
        if (v == kRaw) return DirEntry{std::string(tree_.name(child)), node_attr(kRaw, child)};
        if (!names_->visible(child)) return std::nullopt;
        return DirEntry{names_->name(child), node_attr(v, child)};
      },
      emit);
}

std::string DataFs::readlink(uint64_t ino) {
  uint32_t id = raw_node(ino);
  if (!S_ISLNK(tree_.mode(id))) throw Error(EINVAL, "not a symlink");
  return std::string(tree_.symlink_target(id));
}

OpenReply DataFs::open(uint64_t ino, int flags) {
  if ((flags & O_ACCMODE) != O_RDONLY) throw Error(EROFS, "read-only file system");
  uint32_t id = node_of(ino).node;
  if (!S_ISREG(tree_.mode(id))) throw Error(EISDIR, "not a regular file");
  OpenReply r;
  r.keep_cache = true;   // an inode's bytes never change: a new version is a new inode
  r.needs_open = false;  // no per-open state: the kernel may stop sending OPEN at all
  return r;
}

uint64_t DataFs::version_tag(uint32_t id, const FileVersion& v) const {
  if (!revalidator_.enabled() || !S_ISREG(tree_.mode(id))) return 0;  // versions never change
  return XXH3_64bits(&v, sizeof v) & kTagMask;
}

std::vector<Slice> DataFs::read(uint64_t ino, uint64_t, uint64_t off, size_t size) {
  const Inode in = node_of(ino);
  if (!S_ISREG(tree_.mode(in.node))) throw Error(EISDIR, "not a regular file");
  const Sample s = store_.resolve(in.node);  // once per read: path, version and slot
  if (in.tag != version_tag(in.node, s.version)) {
    // This inode (and every handle open on it) names an older version: its pages in the kernel
    // hold that version's bytes, so the new version's bytes must not join them.
    bump(counters_.read_errors);
    throw Error(EIO, "source file " + s.path + " changed since it was opened: open it again for the new version");
  }
  if (off == 0 && s.dims.is_image()) bump(in.view == kRaw ? counters_.raw_samples : counters_.decoded_samples);
  if (off == 0) store_.note_read(s);  // a job's access (published orders name any file)
  bump(counters_.reads);
  return in.view == kRaw ? read_raw(s, off, size) : read_decoded(s, off, size);
}

std::vector<Slice> DataFs::read_decoded(const Sample& s, uint64_t off, size_t size) {
  ChunkRef c;
  try {
    c = store_.decoded(s);
  } catch (const Error&) {
    bump(counters_.read_errors);
    revalidator_.maybe_revalidate(s.node, true);  // as for raw/: the source file may have changed
    throw;
  }
  if (off >= c->size() || size == 0) return {};
  size_t n = static_cast<size_t>(std::min<uint64_t>(size, c->size() - off));
  bump(counters_.read_bytes, n);
  return {Slice{c, c->data() + off, n}};
}

std::vector<Slice> DataFs::read_raw(const Sample& s, uint64_t off, size_t size) {
  std::vector<Slice> out;
  if (off >= s.version.size || size == 0) return out;
  size = static_cast<size_t>(std::min<uint64_t>(size, s.version.size - off));
  const uint64_t cs = store_.chunk_size();
  out.reserve((off + size - 1) / cs - off / cs + 1);
  try {
    for (uint64_t pos = off; pos < off + size;) {
      const uint64_t idx = pos / cs, chunk_start = idx * cs;
      ChunkRef c = store_.raw(s, idx);
      const size_t in_chunk = static_cast<size_t>(pos - chunk_start);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(c->size() - in_chunk, off + size - pos));
      out.push_back(Slice{c, c->data() + in_chunk, n});
      pos += n;
    }
  } catch (const Error& e) {
    bump(counters_.read_errors);
    spdlog::warn("read {}: {}", s.path, e.what());
    revalidator_.maybe_revalidate(s.node, true);  // a changed source file shows up here first
    throw;
  }
  bump(counters_.read_bytes, size);
  return out;
}

FsStat DataFs::statfs() {
  FsStat s;
  s.files = tree_.size();
  return s;
}

}  // namespace prepfs

#include "prepfs/core/augmented_fs.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <xxhash.h>

#include <cerrno>

#include "prepfs/common/error.h"
#include "prepfs/core/dir_listing.h"
#include "prepfs/transform/encoders.h"

namespace prepfs {

AugmentedFs::AugmentedFs(const Tree& tree, SampleStore& store, ViewCounters& counters, unsigned aug_reuse,
                         double timeout, Owner unowned, HeaderProber* prober, RenderAhead* ahead, bool page_cache)
    : tree_(tree),
      store_(store),
      counters_(counters),
      prober_(prober),
      ahead_(ahead),
      names_(tree, transform::extension(store.shapes().format)),
      aug_reuse_(std::max(1u, aug_reuse)),
      timeout_(timeout),
      unowned_(unowned),
      opens_(new std::atomic<uint32_t>[tree.size()]),
      use_page_cache_(page_cache && aug_reuse_ > 1),  // with one open per variant, nothing to reuse
      cached_(use_page_cache_ ? new CachedPages[tree.size()] : nullptr) {
  for (size_t i = 0; i < tree.size(); i++) opens_[i].store(0, std::memory_order_relaxed);
}

uint32_t AugmentedFs::node_of(uint64_t ino) const {
  if (ino == 0 || ino - 1 >= tree_.size()) throw Error(ENOENT, "no such inode");
  return static_cast<uint32_t>(ino - 1);
}

Attr AugmentedFs::attr(uint32_t node) const {
  // Every variant's size follows from the header, which a first mount may not have read yet.
  if (prober_ && S_ISREG(tree_.mode(node))) prober_->ensure(node);
  const Tree::FileState state = tree_.file_state(node);
  Attr a;
  a.ino = node + 1;
  a.mtime_ns = state.version.mtime_ns;
  a.timeout = timeout_;
  if (S_ISDIR(state.mode)) {
    a.mode = state.mode;
    a.nlink = 2;
  } else {
    a.mode = S_IFREG | (state.mode & 0444);
    a.size = store_.shapes().augmented_size(state.dims);  // every variant has the same size
  }
  const Owner owner = state.owner.or_else(unowned_);  // the source file's owner, as in decoded/
  a.uid = owner.uid;
  a.gid = owner.gid;
  return a;
}

Attr AugmentedFs::getattr(uint64_t ino) { return attr(node_of(ino)); }

Attr AugmentedFs::lookup(uint64_t parent, std::string_view name) {
  const uint32_t dir = node_of(parent);
  if (prober_) prober_->ensure_dir(dir);  // names here depend on headers
  auto child = names_.lookup(dir, name);
  if (!child) throw Error(ENOENT, "no such entry");
  return attr(*child);
}

void AugmentedFs::readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) {
  uint32_t dir = node_of(ino);
  if (!tree_.is_dir(dir)) throw Error(ENOTDIR, "not a directory");
  if (prober_) prober_->ensure_dir(dir);
  const Node& d = tree_.node(dir);
  list_dir(
      offset, attr(dir), [&] { return attr(dir == Tree::kRoot ? dir : d.parent); }, d.nchildren,
      [&](uint64_t i) -> std::optional<DirEntry> {
        const uint32_t child = d.first_child + static_cast<uint32_t>(i);
        if (!names_.visible(child)) return std::nullopt;
        return DirEntry{names_.name(child), attr(child)};
      },
      emit);
}

std::string AugmentedFs::readlink(uint64_t) { throw Error(EINVAL, "not a symlink"); }

OpenReply AugmentedFs::open(uint64_t ino, int flags) {
  if ((flags & O_ACCMODE) != O_RDONLY) throw Error(EROFS, "read-only file system");
  uint32_t node = node_of(ino);
  if (!S_ISREG(tree_.mode(node))) throw Error(EISDIR, "not a regular file");
  bump(counters_.augmented_opens);
  uint32_t n = opens_[node].fetch_add(1, std::memory_order_relaxed);
  // The last of its aug_reuse serves: the handle holds the bytes, the cache need not.
  const bool last_serve = n % aug_reuse_ == aug_reuse_ - 1;
  const Sample s = store_.resolve(node);
  store_.note_read(s);  // a job's access (published orders)
  ChunkRef bytes = store_.augmented(s, n / aug_reuse_, last_serve);
  // The next open's variant, while the slots are idle. Only after a variant's last serve: before
  // it the next open gets this same variant, just served (and held), and queueing it would only
  // wake the render-ahead thread to find it ready, a context switch per open.
  if (ahead_ && last_serve) ahead_->after_serve(node);
  OpenReply r;
  const bool cached = read_through_page_cache(node, n / aug_reuse_, bytes);
  r.fh = open_.add(bytes, bytes->data(), bytes->size(), cached ? kPageCacheHandle : 0);
  r.keep_cache = cached;
  r.direct_io = !cached;  // a reader of another variant than the cached one must not touch the pages
  return r;
}

bool AugmentedFs::read_through_page_cache(uint32_t node, uint32_t variant, const ChunkRef& bytes) {
  if (!use_page_cache_) return false;
  PageCache* pc = page_cache_.load();
  if (!pc) return false;
  std::lock_guard lock(cached_mu_[node % cached_mu_.size()]);
  CachedPages& c = cached_[node];
  // The pages are good only for the very bytes they were filled from. A variant the daemon
  // rendered again (its entry evicted meanwhile) may differ: crop decode and DCT scaling from a
  // JPEG and a render from cached pixels are different arithmetic. The same entry is the same
  // bytes; another entry is checked by content hash.
  bool same = c.variant == variant && c.bytes.lock() == bytes;
  if (!same && c.variant == variant && XXH3_64bits(bytes->data(), bytes->size()) == c.hash) {
    c.bytes = bytes;
    same = true;
  }
  if (!same) {
    if (c.readers > 0) return false;  // readers of the old bytes still fill and read the pages
    // Under the stripe lock, so that no open of the new bytes reads the old pages before they are
    // gone. No page-cache handle is open, so no read holds a page the drop would wait on.
    c.variant = CachedPages::kNone;
    if (!pc->drop(node + 1)) return false;
    c.variant = variant;
    c.bytes = bytes;
    c.hash = XXH3_64bits(bytes->data(), bytes->size());
    bump(counters_.augmented_page_drops);
  }
  c.readers++;
  bump(counters_.augmented_page_cache_opens);
  return true;
}

void AugmentedFs::page_cache_reader_gone(uint32_t node) {
  std::lock_guard lock(cached_mu_[node % cached_mu_.size()]);
  if (cached_[node].readers > 0) cached_[node].readers--;
}

std::vector<Slice> AugmentedFs::read(uint64_t, uint64_t fh, uint64_t off, size_t size) {
  std::vector<Slice> out = open_.read(fh, off, size);
  bump(counters_.augmented_reads);
  for (const Slice& s : out) bump(counters_.augmented_read_bytes, s.len);
  return out;
}

void AugmentedFs::release(uint64_t ino, uint64_t fh) {
  if (open_.release(fh) == kPageCacheHandle) page_cache_reader_gone(node_of(ino));
}

FsStat AugmentedFs::statfs() {
  FsStat s;
  s.files = tree_.size();
  return s;
}

}  // namespace prepfs

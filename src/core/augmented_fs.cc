#include "prepfs/core/augmented_fs.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "prepfs/common/error.h"
#include "prepfs/core/dir_listing.h"
#include "prepfs/transform/encoders.h"

namespace prepfs {

AugmentedFs::AugmentedFs(const Tree& tree, SampleStore& store, ViewCounters& counters, unsigned aug_reuse,
                         double timeout, Owner unowned, HeaderProber* prober, RenderAhead* ahead, bool page_cache,
                         FileRevalidator* revalidator, Invalidations* invalidations, uint64_t held_budget)
    : tree_(tree),
      store_(store),
      counters_(counters),
      prober_(prober),
      revalidator_(revalidator),
      ahead_(ahead),
      names_(tree, transform::extension(store.shapes().format)),
      aug_reuse_(std::max(1u, aug_reuse)),
      timeout_(timeout),
      unowned_(unowned),
      opens_(new std::atomic<uint32_t>[tree.size()]),
      pages_(page_cache ? std::make_unique<VariantPages>(tree.size()) : nullptr),
      held_budget_(held_budget) {
  for (size_t i = 0; i < tree.size(); i++) opens_[i].store(0, std::memory_order_relaxed);
  if (revalidator_ && invalidations)
    revalidator_->on_change([invalidations](uint32_t node, const FileVersion&) { invalidations->push(node + 1); });
}

uint32_t AugmentedFs::node_of(uint64_t ino) const {
  if (ino == 0 || ino - 1 >= tree_.size()) throw Error(ENOENT, "no such inode");
  return static_cast<uint32_t>(ino - 1);
}

Attr AugmentedFs::attr(uint32_t node) const {
  if (revalidator_) revalidator_->maybe_revalidate(node, false);  // a resized image: another size
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
  return attr(names_.find(dir, name));
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
  if (revalidator_) revalidator_->maybe_revalidate(node, false);
  uint32_t n = opens_[node].fetch_add(1, std::memory_order_relaxed);
  // The last of its aug_reuse serves: the handle holds the bytes, the cache need not.
  const bool last_serve = n % aug_reuse_ == aug_reuse_ - 1;
  Sample s = store_.resolve(node);
  store_.note_read(s);  // a job's access (published orders)
  const uint32_t variant = n / aug_reuse_;
  ChunkRef bytes;
  try {
    // The header first (a lazy first mount's), so an unheld handle re-renders the very sample
    // this open rendered, not one resolved again after a change.
    s = store_.with_header(s);
    bytes = store_.augmented(s, variant, last_serve);
  } catch (const Error&) {
    if (revalidator_) revalidator_->maybe_revalidate(node, true);  // the source file may have changed
    throw;
  }
  // The next open's variant, while the slots are idle. Only after a variant's last serve: before
  // it the next open gets this same variant, just served (and held), and queueing it would only
  // wake the render-ahead thread to find it ready, a context switch per open.
  if (ahead_ && last_serve) ahead_->after_serve(node);
  OpenReply r;
  using Mode = VariantPages::Mode;
  const Mode mode = pages_ ? pages_->open(node, variant, bytes) : Mode::bypass;
  const uint64_t pages_tag = pages_ ? uint64_t(mode) : 0;
  if (take_held(bytes->size())) {
    r.fh = open_.add(bytes, bytes->data(), bytes->size(), pages_tag);
  } else {
    r.fh = kUnheldBit | next_unheld_.fetch_add(1, std::memory_order_relaxed);
    Unheld u{s, variant, bytes->size(), pages_tag};
    std::lock_guard lock(unheld_mu_);
    unheld_.emplace(r.fh, std::move(u));
    bump(counters_.augmented_unheld_opens);
  }
  r.direct_io = mode == Mode::bypass;
  // A bypassing handle leaves the pages of the others alone; the first of new bytes drops them.
  r.keep_cache = pages_ && mode != Mode::invalidate;
  if (mode != Mode::bypass) bump(counters_.augmented_page_cache_opens);
  if (mode == Mode::invalidate) bump(counters_.augmented_page_invalidations);
  return r;
}

bool AugmentedFs::take_held(size_t size) {
  uint64_t held = held_.load(std::memory_order_relaxed);
  do {
    // One handle may always hold its bytes: a variant larger than the budget would otherwise be
    // rendered again on every read.
    if (held != 0 && (held > held_budget_ || size > held_budget_ - held)) return false;
  } while (!held_.compare_exchange_weak(held, held + size, std::memory_order_relaxed));
  return true;
}

std::vector<Slice> AugmentedFs::read_unheld(uint32_t node, uint64_t fh, uint64_t off, size_t size) {
  Unheld u;
  {
    std::lock_guard lock(unheld_mu_);
    auto it = unheld_.find(fh);
    if (it == unheld_.end()) throw Error(EBADF, "unknown handle");
    u = it->second;
  }
  if (u.pages_tag == uint64_t(VariantPages::Mode::invalidate)) pages_->invalidated(node);
  if (off >= u.size) return {};
  // The sample as opened: a file changed since fails the render (EIO) instead of serving
  // another version's variant to a handle that may have read part of this one.
  ChunkRef bytes = store_.rerender(u.sample, u.variant);
  if (bytes->size() != u.size) throw Error(EIO, "augmented " + u.sample.path + " changed while open");
  const size_t n = static_cast<size_t>(std::min<uint64_t>(size, bytes->size() - off));
  return {Slice{bytes, bytes->data() + off, n}};
}

std::vector<Slice> AugmentedFs::read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) {
  std::vector<Slice> out;
  if (fh & kUnheldBit) {
    out = read_unheld(node_of(ino), fh, off, size);
  } else {
    uint64_t tag = 0;
    out = open_.read(fh, off, size, &tag);
    if (tag == uint64_t(VariantPages::Mode::invalidate)) pages_->invalidated(node_of(ino));
  }
  bump(counters_.augmented_reads);
  for (const Slice& s : out) bump(counters_.augmented_read_bytes, s.len);
  return out;
}

void AugmentedFs::release(uint64_t ino, uint64_t fh) {
  uint64_t tag = 0;
  if (fh & kUnheldBit) {
    std::lock_guard lock(unheld_mu_);
    auto it = unheld_.find(fh);
    if (it == unheld_.end()) return;
    tag = it->second.pages_tag;
    unheld_.erase(it);
  } else {
    size_t held = 0;
    tag = open_.release(fh, &held);
    held_.fetch_sub(held, std::memory_order_relaxed);
  }
  if (tag != 0 && pages_) pages_->release(node_of(ino), VariantPages::Mode(tag));
}

FsStat AugmentedFs::statfs() {
  FsStat s;
  s.files = tree_.size();
  return s;
}

}  // namespace prepfs

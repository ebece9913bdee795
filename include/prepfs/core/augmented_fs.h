// augmented/: every image of the source as its augmented output, a new variant per open.
// Served by its own FUSE session (mounted at MNT/augmented) because each open must reach the
// daemon: open k of a file is assigned variant k / aug_reuse, and the handle holds that variant's
// bytes, so no reader ever sees an older variant or a mix of two.
//
// The page cache. With aug_reuse > 1 a variant is read several times; letting the kernel keep its
// pages spares those repeat reads their round trips and copies. An inode's pages are one variant,
// though, while its handles may hold different ones. So per file this keeps which variant the
// kernel may hold and how many open handles read through the page cache:
//   - an open of that variant reads through the page cache (keep_cache);
//   - an open of another variant, with no page-cache reader left, first drops the inode's pages
//     (synchronously, through PageCache) and then makes its variant the cached one;
//   - an open of another variant while page-cache readers of the old one remain bypasses the page
//     cache (direct_io), as every open does with aug_reuse = 1, without a PageCache, or when a
//     drop fails.
// Pages only ever enter the cache through page-cache handles, and those all hold the very bytes
// the pages came from (the same entry, or the same content hash: a variant rendered again may be
// other bytes), so the cache never holds a mix. A handle's last read ends before its release reaches
// the daemon (the kernel holds the handle while reads are in flight).
// Inodes: node id + 1 (the session's root, inode 1, is the source root).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "prepfs/common/stats.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/core/image_names.h"
#include "prepfs/core/open_snapshots.h"
#include "prepfs/index/tree.h"
#include "prepfs/store/header_prober.h"
#include "prepfs/store/render_ahead.h"
#include "prepfs/store/sample_store.h"

namespace prepfs {

class AugmentedFs final : public Filesystem {
 public:
  // unowned: the owner shown for entries the source has no owner for (DataFsConfig::unowned).
  // prober (may be null: every header known) reads the headers a first mount did not wait for.
  // ahead (may be null: off) renders a file's next variant after each serve.
  // page_cache: let the kernel keep a variant's pages across its opens (only with aug_reuse > 1,
  // and once a session attaches its PageCache).
  AugmentedFs(const Tree& tree, SampleStore& store, ViewCounters& counters, unsigned aug_reuse, double timeout,
              Owner unowned = {}, HeaderProber* prober = nullptr, RenderAhead* ahead = nullptr,
              bool page_cache = true);

  Attr getattr(uint64_t ino) override;
  Attr lookup(uint64_t parent, std::string_view name) override;
  void readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) override;
  std::string readlink(uint64_t) override;
  OpenReply open(uint64_t ino, int flags) override;
  std::vector<Slice> read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) override;
  void release(uint64_t ino, uint64_t fh) override;
  FsStat statfs() override;
  void attach_page_cache(PageCache* pc) override { page_cache_.store(pc); }

  // The variant the next open of node serves (what the cache may hold for it).
  uint32_t current_variant(uint32_t node) const {
    return node < tree_.size() ? opens_[node].load(std::memory_order_relaxed) / aug_reuse_ : 0;
  }
  unsigned aug_reuse() const { return aug_reuse_; }

 private:
  uint32_t node_of(uint64_t ino) const;
  Attr attr(uint32_t node) const;
  // True when this open of `variant`, served `bytes`, may read through the page cache (see the
  // top of the file).
  bool read_through_page_cache(uint32_t node, uint32_t variant, const ChunkRef& bytes);
  void page_cache_reader_gone(uint32_t node);

  // Per file: the variant the kernel's page cache may hold for it, the bytes its pages come from
  // (the entry, not kept alive, and its content hash), and its open page-cache readers.
  struct CachedPages {
    static constexpr uint32_t kNone = UINT32_MAX;
    uint32_t variant = kNone;
    uint32_t readers = 0;
    std::weak_ptr<const Chunk> bytes;
    uint64_t hash = 0;
  };
  static constexpr uint64_t kPageCacheHandle = 1;  // OpenSnapshots tag of a page-cache reader

  const Tree& tree_;
  SampleStore& store_;
  ViewCounters& counters_;
  HeaderProber* prober_;
  RenderAhead* ahead_;
  ImageNames names_;
  unsigned aug_reuse_;
  double timeout_;
  Owner unowned_;
  std::unique_ptr<std::atomic<uint32_t>[]> opens_;  // per node: opens so far
  OpenSnapshots open_;
  const bool use_page_cache_;
  std::atomic<PageCache*> page_cache_{nullptr};
  std::unique_ptr<CachedPages[]> cached_;             // per node, guarded by its stripe
  std::array<std::mutex, 64> cached_mu_;              // stripes: node % 64
};

}  // namespace prepfs

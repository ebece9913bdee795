// augmented/: every image of the source as its augmented output, a new variant per open.
// Served by its own FUSE session (mounted at MNT/augmented) because each open must reach the
// daemon: open k of a file is assigned variant k / aug_reuse, and the handle holds that variant's
// bytes, so no reader ever sees an older variant or a mix of two.
//
// The page cache: while a file's bytes stay the same (aug_reuse > 1: a variant's repeat opens) the
// kernel may keep its pages and serve the repeat opens without a read; with a variant per open it
// still reads ahead in large requests instead of the reader's own small ones. VariantPages
// decides per open whether the handle may use the page cache, so that no reader ever sees
// another variant's pages (aug_page_cache=0: every handle bypasses it with direct_io).
//
// Memory: the handles hold their variants' bytes up to `held_budget` between them. Past it, an
// open keeps only what defines its variant (the sample as opened, and the variant's number), and
// each read renders it again: the same bytes, since a variant is a function of the seed, the
// file's version and the number (or EIO, when the file changed since; ETIMEDOUT when the render
// waited a minute for memory or a cpu slot). A reader that keeps many
// files open (a list of open files, a descriptor leak) then costs CPU, not unbounded memory.
// Inodes: node id + 1 (the session's root, inode 1, is the source root).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "prepfs/common/stats.h"
#include "prepfs/core/file_revalidator.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/core/image_names.h"
#include "prepfs/core/invalidations.h"
#include "prepfs/core/open_snapshots.h"
#include "prepfs/core/variant_pages.h"
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
  // page_cache: let the kernel's page cache serve a variant's reads (see above).
  // revalidator (may be null: an immutable source) checks a file's source version on lookups,
  // getattrs and opens under metadata_ttl, as raw/ and decoded/ do: an augmented-only job would
  // otherwise never see a changed file (old variants, or EIO on every open). A changed file's
  // inode goes to `invalidations` (this session's): the kernel's size of it may be another now.
  // held_budget: the bytes open handles may hold (see above; one handle always may).
  AugmentedFs(const Tree& tree, SampleStore& store, ViewCounters& counters, unsigned aug_reuse, double timeout,
              Owner unowned = {}, HeaderProber* prober = nullptr, RenderAhead* ahead = nullptr,
              bool page_cache = true, FileRevalidator* revalidator = nullptr,
              Invalidations* invalidations = nullptr, uint64_t held_budget = UINT64_MAX);

  Attr getattr(uint64_t ino) override;
  Attr lookup(uint64_t parent, std::string_view name) override;
  void readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) override;
  std::string readlink(uint64_t) override;
  OpenReply open(uint64_t ino, int flags) override;
  std::vector<Slice> read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) override;
  void release(uint64_t ino, uint64_t fh) override;
  FsStat statfs() override;

  // The variant the next open of node serves (what the cache may hold for it), or with `later`
  // the open that many opens after the next (a file listed again further on in an order).
  uint32_t current_variant(uint32_t node, uint32_t later = 0) const {
    return node < tree_.size() ? (opens_[node].load(std::memory_order_relaxed) + later) / aug_reuse_ : 0;
  }
  unsigned aug_reuse() const { return aug_reuse_; }
  uint64_t held_bytes() const { return held_.load(std::memory_order_relaxed); }

 private:
  // A handle past the held budget: what renders its variant again on each read.
  struct Unheld {
    Sample sample;  // as opened, header known: its version is checked again by the render
    uint32_t variant = 0;
    uint64_t size = 0;       // what the open's render gave, and the kernel was told
    uint64_t pages_tag = 0;  // VariantPages::Mode as an OpenSnapshots tag, 0 without pages
  };
  static constexpr uint64_t kUnheldBit = uint64_t(1) << 63;  // never set in OpenSnapshots' handles
  bool take_held(size_t size);
  std::vector<Slice> read_unheld(uint32_t node, uint64_t fh, uint64_t off, size_t size);

  uint32_t node_of(uint64_t ino) const;
  Attr attr(uint32_t node) const;

  const Tree& tree_;
  SampleStore& store_;
  ViewCounters& counters_;
  HeaderProber* prober_;
  FileRevalidator* revalidator_;
  RenderAhead* ahead_;
  ImageNames names_;
  unsigned aug_reuse_;
  double timeout_;
  Owner unowned_;
  std::unique_ptr<std::atomic<uint32_t>[]> opens_;  // per node: opens so far
  OpenSnapshots open_;
  std::unique_ptr<VariantPages> pages_;  // null with aug_page_cache=0
  const uint64_t held_budget_;
  std::atomic<uint64_t> held_{0};  // bytes the handles in open_ hold
  std::atomic<uint64_t> next_unheld_{0};
  std::mutex unheld_mu_;
  std::unordered_map<uint64_t, Unheld> unheld_;  // by handle (kUnheldBit set)
};

}  // namespace prepfs

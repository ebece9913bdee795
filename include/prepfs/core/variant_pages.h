// Which bytes the kernel's page cache may hold for each file of a view whose bytes change from one
// open to the next (augmented/: a variant per open, or per aug_reuse opens), and so how each open
// must answer. An inode has one page cache while its handles may hold different bytes; the kernel
// drops an inode's pages whenever an open is answered without keep_cache (libfuse: keep_cache
// "signals the kernel that any currently cached file data need not be invalidated"), before that
// open returns. Per file this keeps the bytes the pages come from (the entry, not kept alive, and
// its content hash), the open handles reading through the page cache, and whether the kernel may
// not have dropped older pages yet. An open is then answered:
//   - keep: its bytes are those the pages come from, and an earlier open has dropped any older
//     pages (one of its reads arrived, and reads come only after their open returned): keep_cache;
//   - invalidate: its bytes become the file's cached bytes (no page-cache handle of other bytes is
//     open), or they are already but no read has yet shown the older pages gone: no keep_cache, so
//     the kernel drops the inode's pages in this open;
//   - bypass: other bytes while page-cache handles of the cached bytes are open (their reads still
//     fill pages): direct_io, with keep_cache so that the open leaves their pages alone.
// Pages only enter the cache through keep and invalidate handles, which all hold the cached bytes
// (the same entry, or other entry with the same content: a variant rendered again on another path
// may be other bytes), so the cache never holds a mix. A handle's release reaches the daemon only
// after its reads ended (the kernel holds the handle while reads are in flight).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "prepfs/cache/chunk.h"

namespace prepfs {

class VariantPages {
 public:
  enum class Mode : uint8_t { bypass = 1, invalidate = 2, keep = 3 };

  // Room for `files` files is taken a block of files at a time, when one of them is first opened:
  // a mount of millions of files whose augmented/ is never opened costs a pointer per block.
  explicit VariantPages(uint64_t files);
  ~VariantPages();
  VariantPages(const VariantPages&) = delete;
  VariantPages& operator=(const VariantPages&) = delete;

  // An open of node serves `variant`, whose bytes are `bytes`.
  Mode open(uint32_t node, uint32_t variant, const ChunkRef& bytes);
  // A read arrived on a handle opened with Mode::invalidate: its open has dropped older pages.
  void invalidated(uint32_t node);
  // A handle opened with `mode` was released.
  void release(uint32_t node, Mode mode);

  uint64_t allocated_bytes() const;  // the blocks taken so far

 private:
  struct File {
    static constexpr uint32_t kNone = UINT32_MAX;
    uint32_t variant = kNone;
    uint32_t readers = 0;       // open keep and invalidate handles
    bool invalidating = false;  // older pages may not have been dropped yet
    std::weak_ptr<const Chunk> bytes;
    uint64_t hash = 0;
  };

  static constexpr uint32_t kBlock = 1024;  // files per block
  File& file(uint32_t node);                // its block is allocated on first use

  uint64_t blocks_count_;
  std::unique_ptr<std::atomic<File*>[]> blocks_;
  std::array<std::mutex, 64> mu_;  // stripes: node % 64
};

}  // namespace prepfs

// The kernel's page cache behind one FUSE session, as the core sees it. A view whose bytes change
// from one open to the next (augmented/) may still let the kernel keep pages while they stay the
// same; before they change, it must drop what the kernel holds. The FUSE adaptor implements this
// with a synchronous invalidation, so the core never names FUSE.
#pragma once

#include <cstdint>

namespace prepfs {

class PageCache {
 public:
  virtual ~PageCache() = default;
  // Drops every cached page of inode ino before returning. False when the kernel refused: the
  // caller must then not rely on the page cache for that inode.
  virtual bool drop(uint64_t ino) = 0;
};

}  // namespace prepfs

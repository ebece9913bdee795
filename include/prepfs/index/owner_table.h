// The distinct owners (uid, gid) of a tree's entries. A node keeps a 16-bit index into this table
// instead of 8 bytes of ids: datasets have few owners. Reads are lock-free; intern() must be
// serialized by the caller (the scan, or the tree's revalidation writer) and never moves entries,
// so a reader that got an index always finds its owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "prepfs/source/source.h"

namespace prepfs {

class OwnerTable {
 public:
  // Owners beyond the table's room (65535, or the headroom left for revalidation) show as this:
  // nobody/nogroup, so only the "other" permission bits apply, never more than the source grants.
  static constexpr uint16_t kOverflow = 0xffff;
  static constexpr Owner kNobody{65534, 65534};

  // Room for `owners` and `headroom` more (owners that appear when files are revalidated).
  explicit OwnerTable(const std::vector<Owner>& owners = {}, size_t headroom = 256);

  uint16_t intern(const Owner& o);  // the index of o, added if new; kOverflow when full
  Owner at(uint16_t index) const;
  std::vector<Owner> all() const;  // in index order, for the persisted index
  size_t memory_bytes() const { return capacity_ * sizeof(uint64_t) + index_.size() * 32; }

 private:
  static uint64_t pack(const Owner& o) { return uint64_t(o.uid) << 32 | o.gid; }
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;
  size_t capacity_ = 0;
  std::atomic<size_t> count_{0};
  std::unordered_map<uint64_t, uint16_t> index_;  // for intern(), which the caller serializes
};

}  // namespace prepfs

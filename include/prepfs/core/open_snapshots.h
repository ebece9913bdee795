// The bytes each open handle of a per-open file reads: fixed at open, shared by reference, read
// consistently from start to end whatever later opens produce. Used by augmented/ (one variant
// per open) and .prepfs/ (one rendering per open).
#pragma once

#include <atomic>
#include <cerrno>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/core/filesystem.h"

namespace prepfs {

class OpenSnapshots {
 public:
  // Keeps data[0, size) alive through hold until release(); returns the new handle. tag is the
  // caller's note about the handle, given back by release().
  uint64_t add(std::shared_ptr<const void> hold, const char* data, size_t size, uint64_t tag = 0) {
    uint64_t fh = next_fh_++;
    std::lock_guard lock(mu_);
    open_[fh] = Entry{Slice{std::move(hold), data, size}, tag};
    return fh;
  }

  // tag (if not null): the handle's tag.
  std::vector<Slice> read(uint64_t fh, uint64_t off, size_t size, uint64_t* tag = nullptr) const {
    Slice s = get(fh, tag);
    if (off >= s.len) return {};
    size_t n = static_cast<size_t>(std::min<uint64_t>(size, s.len - off));
    return {Slice{s.hold, s.data + off, n}};
  }

  void check(uint64_t fh) const { get(fh, nullptr); }  // throws EBADF for an unknown handle

  // Forgets the handle; returns its tag (0 for an unknown handle), and the size it held in
  // `size` (if not null; 0 for an unknown handle).
  uint64_t release(uint64_t fh, size_t* size = nullptr) {
    if (size) *size = 0;
    std::lock_guard lock(mu_);
    auto it = open_.find(fh);
    if (it == open_.end()) return 0;
    uint64_t tag = it->second.tag;
    if (size) *size = it->second.bytes.len;
    open_.erase(it);
    return tag;
  }

 private:
  struct Entry {
    Slice bytes;
    uint64_t tag = 0;
  };

  Slice get(uint64_t fh, uint64_t* tag) const {
    std::lock_guard lock(mu_);
    auto it = open_.find(fh);
    if (it == open_.end()) throw Error(EBADF, "unknown handle");
    if (tag) *tag = it->second.tag;
    return it->second.bytes;
  }

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> open_;
  std::atomic<uint64_t> next_fh_{1};
};

}  // namespace prepfs

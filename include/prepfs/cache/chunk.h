// An immutable run of cached bytes, shared by reference between tiers and in-flight replies so a
// hit never copies: the FUSE reply gathers straight from it.
#pragma once

#include <cstddef>
#include <memory>

namespace prepfs {

class Chunk {
 public:
  // Uninitialised storage for size payload bytes behind `offset` bytes of header room.
  static std::shared_ptr<Chunk> allocate(size_t size, size_t offset = 0) {
    return std::shared_ptr<Chunk>(new Chunk(size, offset));
  }
  char* mutable_data() { return buf_.get() + offset_; }
  char* raw() { return buf_.get(); }  // header room included
  const char* data() const { return buf_.get() + offset_; }
  size_t size() const { return size_; }
  void shrink(size_t size) {
    if (size < size_) size_ = size;
  }

 private:
  Chunk(size_t size, size_t offset) : buf_(new char[size + offset]), offset_(offset), size_(size) {}
  std::unique_ptr<char[]> buf_;
  size_t offset_;
  size_t size_;
};

using ChunkRef = std::shared_ptr<const Chunk>;

}  // namespace prepfs

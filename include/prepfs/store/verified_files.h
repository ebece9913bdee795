// Files whose bytes, this version of them, have been decoded to their end without error once.
// A render from such a file may stop reading at the bottom of its crop (FastPaths::stop_below_crop):
// the rest is known to decode, so it fails on exactly the files a full decode fails on (none of
// these), and a crop's pixels never depend on the rows below it. That keeps crop decode exact in
// bytes and in errors while sparing, after each file's first render, the entropy decoding below
// the crop, most of what a render from a JPEG costs (bench/transform/README.md).
//
// Direct-mapped and lock-free: one 64-bit fingerprint of (node, version) per slot. A collision
// only forgets a file (read to its end again next time); it never makes another look verified.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "prepfs/source/source.h"

namespace prepfs {

class VerifiedFiles {
 public:
  // files: how many the set should hold without forgetting many (slots: twice that, rounded up to
  // a power of two, between 1K and 4M: at most 32 MiB).
  explicit VerifiedFiles(uint64_t files);

  bool contains(uint32_t node, const FileVersion& version) const;
  void insert(uint32_t node, const FileVersion& version);

 private:
  static uint64_t fingerprint(uint32_t node, const FileVersion& version);

  uint64_t mask_;
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;
};

}  // namespace prepfs

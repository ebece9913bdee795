#include "prepfs/store/verified_files.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>

namespace prepfs {

VerifiedFiles::VerifiedFiles(uint64_t files) {
  const uint64_t slots = std::bit_ceil(std::clamp<uint64_t>(2 * files, 1u << 10, 1u << 22));
  mask_ = slots - 1;
  slots_.reset(new std::atomic<uint64_t>[slots]);
  for (uint64_t i = 0; i < slots; i++) slots_[i].store(0, std::memory_order_relaxed);
}

uint64_t VerifiedFiles::fingerprint(uint32_t node, const FileVersion& v) {
  const uint64_t fields[] = {node, v.size, uint64_t(v.mtime_ns), v.identity};
  const uint64_t h = XXH3_64bits(fields, sizeof fields);
  return h == 0 ? 1 : h;  // 0 marks an empty slot
}

bool VerifiedFiles::contains(uint32_t node, const FileVersion& version) const {
  const uint64_t fp = fingerprint(node, version);
  return slots_[fp & mask_].load(std::memory_order_relaxed) == fp;
}

void VerifiedFiles::insert(uint32_t node, const FileVersion& version) {
  const uint64_t fp = fingerprint(node, version);
  slots_[fp & mask_].store(fp, std::memory_order_relaxed);
}

}  // namespace prepfs

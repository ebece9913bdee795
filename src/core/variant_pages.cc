#include "prepfs/core/variant_pages.h"

#include <xxhash.h>

namespace prepfs {

VariantPages::VariantPages(uint64_t files)
    : blocks_count_((files + kBlock - 1) / kBlock), blocks_(new std::atomic<File*>[blocks_count_]) {
  for (uint64_t b = 0; b < blocks_count_; b++) blocks_[b].store(nullptr, std::memory_order_relaxed);
}

VariantPages::~VariantPages() {
  for (uint64_t b = 0; b < blocks_count_; b++) delete[] blocks_[b].load(std::memory_order_relaxed);
}

VariantPages::File& VariantPages::file(uint32_t node) {
  std::atomic<File*>& slot = blocks_[node / kBlock];
  File* block = slot.load(std::memory_order_acquire);
  if (!block) {
    // Two first opens in one block (different stripes) may race: one allocation wins.
    File* fresh = new File[kBlock];
    if (slot.compare_exchange_strong(block, fresh, std::memory_order_acq_rel))
      block = fresh;
    else
      delete[] fresh;
  }
  return block[node % kBlock];
}

uint64_t VariantPages::allocated_bytes() const {
  uint64_t blocks = 0;
  for (uint64_t b = 0; b < blocks_count_; b++) blocks += blocks_[b].load(std::memory_order_relaxed) != nullptr;
  return blocks * kBlock * sizeof(File);
}

VariantPages::Mode VariantPages::open(uint32_t node, uint32_t variant, const ChunkRef& bytes) {
  std::lock_guard lock(mu_[node % mu_.size()]);
  File& f = file(node);
  // The same entry is the same bytes; another entry (rendered again) is compared by content.
  bool same = f.variant == variant && f.bytes.lock() == bytes;
  if (!same && f.variant == variant && XXH3_64bits(bytes->data(), bytes->size()) == f.hash) {
    f.bytes = bytes;
    same = true;
  }
  if (!same) {
    if (f.readers > 0) return Mode::bypass;  // their reads still fill the pages
    f.variant = variant;
    f.bytes = bytes;
    f.hash = XXH3_64bits(bytes->data(), bytes->size());
    f.invalidating = true;
  }
  f.readers++;
  return f.invalidating ? Mode::invalidate : Mode::keep;
}

void VariantPages::invalidated(uint32_t node) {
  std::lock_guard lock(mu_[node % mu_.size()]);
  file(node).invalidating = false;
}

void VariantPages::release(uint32_t node, Mode mode) {
  if (mode == Mode::bypass) return;
  std::lock_guard lock(mu_[node % mu_.size()]);
  File& f = file(node);
  if (f.readers > 0) f.readers--;
}

}  // namespace prepfs

#include "prepfs/core/variant_pages.h"

#include <xxhash.h>

namespace prepfs {

VariantPages::VariantPages(uint64_t files) : files_(new File[files]) {}

VariantPages::Mode VariantPages::open(uint32_t node, uint32_t variant, const ChunkRef& bytes) {
  std::lock_guard lock(mu_[node % mu_.size()]);
  File& f = files_[node];
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
  files_[node].invalidating = false;
}

void VariantPages::release(uint32_t node, Mode mode) {
  if (mode == Mode::bypass) return;
  std::lock_guard lock(mu_[node % mu_.size()]);
  if (files_[node].readers > 0) files_[node].readers--;
}

}  // namespace prepfs

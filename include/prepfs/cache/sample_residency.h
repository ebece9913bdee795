// How many cached entries each sample has, over all tiers: a sample with any is resident (a read
// of it would not go to the source). The tiers' indexes count as they admit and drop entries;
// .prepfs/resident turns it into a bitmap for opportunistic sampling. Lock-free: one relaxed
// atomic per sample.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "prepfs/cache/sample_knowledge.h"

namespace prepfs {

class SampleResidency {
 public:
  explicit SampleResidency(size_t samples) : n_(samples), counts_(new std::atomic<uint32_t>[samples]) {
    for (size_t i = 0; i < n_; i++) counts_[i].store(0, std::memory_order_relaxed);
  }
  void add(uint32_t sample) {
    if (sample < n_) counts_[sample].fetch_add(1, std::memory_order_relaxed);
  }
  void remove(uint32_t sample) {
    if (sample < n_) counts_[sample].fetch_sub(1, std::memory_order_relaxed);
  }
  bool resident(uint32_t sample) const { return sample < n_ && counts_[sample].load(std::memory_order_relaxed) > 0; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  std::unique_ptr<std::atomic<uint32_t>[]> counts_;
};

}  // namespace prepfs

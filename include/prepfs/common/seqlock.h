// Sequence locks over striped counters: many readers, rare serialized writers, and a reader
// never sees a half-written record. A reader retries while a writer of its stripe is active;
// a writer takes one mutex. Fields under a seqlock must be read and written through
// std::atomic_ref (relaxed), so a reader racing a writer reads garbage it then discards, never
// undefined behaviour.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace prepfs {

class StripedSeqlock {
 public:
  StripedSeqlock() : seq_(new std::atomic<uint32_t>[kStripes]) {
    for (size_t i = 0; i < kStripes; i++) seq_[i].store(0, std::memory_order_relaxed);
  }

  // Runs read() until it ran without a concurrent write to the record `id`; returns its result.
  template <class Read>
  auto read(uint64_t id, Read read) const {
    const std::atomic<uint32_t>& seq = seq_[id % kStripes];
    for (unsigned spins = 0;; spins++) {
      uint32_t before = seq.load(std::memory_order_acquire);
      if (before & 1) {  // a writer is at work
        if (spins > 64) std::this_thread::yield();
        continue;
      }
      auto value = read();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq.load(std::memory_order_relaxed) == before) return value;
    }
  }

  // Runs write() as one update of the record `id`.
  template <class Write>
  void write(uint64_t id, Write write) {
    std::lock_guard lock(write_mu_);
    std::atomic<uint32_t>& seq = seq_[id % kStripes];
    uint32_t s = seq.load(std::memory_order_relaxed);
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    write();
    seq.store(s + 2, std::memory_order_release);
  }

 private:
  static constexpr size_t kStripes = 64;
  std::unique_ptr<std::atomic<uint32_t>[]> seq_;
  std::mutex write_mu_;
};

// Relaxed atomic access to a plain field under a seqlock.
template <class T>
T relaxed_load(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}
template <class T>
void relaxed_store(T& field, T value) {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

}  // namespace prepfs

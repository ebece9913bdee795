// Inodes whose cached pages and attributes the kernel must drop because their source file
// changed. The views push them from any thread; the front door that talks to the kernel (the
// FUSE session of the main tree) drains them on its own thread, since a request handler must not
// block on the kernel's invalidation of its own inode.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace prepfs {

class Invalidations {
 public:
  void push(uint64_t ino) {
    {
      std::lock_guard lock(mu_);
      if (queue_.size() >= kMaxQueued) return;  // the kernel will revalidate on its own timeout
      queue_.push_back(ino);
    }
    cv_.notify_one();
  }
  // What is queued, waiting up to `timeout` for something to arrive.
  std::vector<uint64_t> wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
    std::vector<uint64_t> out(queue_.begin(), queue_.end());
    queue_.clear();
    return out;
  }

 private:
  static constexpr size_t kMaxQueued = 1 << 16;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint64_t> queue_;
};

}  // namespace prepfs

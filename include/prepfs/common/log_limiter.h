// At most one log line per interval from one place: a failure that repeats on every request (a
// stuck source, a full disk) is said once in a while, not a thousand times a second.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace prepfs {

class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::seconds every = std::chrono::seconds(10)) : every_(every) {}
  // True when a line may be logged now (and the interval starts again).
  bool allow() {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t last = last_.load(std::memory_order_relaxed);
    if (last != 0 && now - last < std::chrono::duration_cast<std::chrono::steady_clock::duration>(every_).count())
      return false;
    return last_.compare_exchange_strong(last, now, std::memory_order_relaxed);
  }

 private:
  std::chrono::seconds every_;
  std::atomic<int64_t> last_{0};
};

}  // namespace prepfs

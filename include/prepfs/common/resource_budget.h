// A quantity of something (cores for transforms, bytes of transform memory) that callers take a
// part of and give back. A taker waits for its part at most a bound, and a part larger than the
// whole is refused at once: no wait in the daemon is unbounded. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace prepfs {

class ResourceBudget {
 public:
  explicit ResourceBudget(uint64_t total) : total_(total) {}

  enum class Take { taken, too_large, timed_out };
  // Takes `amount` (0 is always taken), waiting at most `wait` for others to give it back.
  // Waiters are served in no particular order.
  Take take(uint64_t amount, std::chrono::milliseconds wait);
  // Takes `amount` only if it is free now and nobody waits: work that must never delay a waiter
  // (rendering ahead of the readers) takes its part this way.
  bool take_if_idle(uint64_t amount);
  // The same, waiting at most `wait` for the budget to become idle; false if it did not. Such
  // takers are woken when a part comes back while nobody waits (one at a time), never polled:
  // work waiting to run ahead costs nothing while the readers keep every part busy.
  bool take_when_idle(uint64_t amount, std::chrono::milliseconds wait);
  void give_back(uint64_t amount);
  // A new total (cpu=auto resizes the transform slots). What is taken stays taken: after a
  // shrink, takers wait until enough is given back.
  void set_total(uint64_t total);

  uint64_t total() const;
  uint64_t in_use() const;
  unsigned waiting() const;  // takers waiting right now

  // Gives `amount` back when it goes out of scope (unless released).
  class Hold {
   public:
    Hold() = default;
    Hold(ResourceBudget* budget, uint64_t amount) : budget_(budget), amount_(amount) {}
    Hold(Hold&& o) noexcept : budget_(o.budget_), amount_(o.amount_) { o.budget_ = nullptr; }
    Hold& operator=(Hold&& o) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { reset(); }
    void reset();
    uint64_t amount() const { return budget_ ? amount_ : 0; }

   private:
    ResourceBudget* budget_ = nullptr;
    uint64_t amount_ = 0;
  };

 private:
  mutable std::mutex mu_;
  // Free for work ahead: `amount` fits and no taker waits. (The wake-ups check for 1, what every
  // idle taker in the daemon takes; a larger one may sleep until its wait ends.)
  bool idle_locked(uint64_t amount) const { return waiting_ == 0 && used_ <= total_ && total_ - used_ >= amount; }
  std::condition_variable freed_;
  std::condition_variable idle_;  // take_when_idle's takers
  uint64_t total_;
  uint64_t used_ = 0;
  unsigned waiting_ = 0;
};

}  // namespace prepfs

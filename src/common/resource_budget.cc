#include "prepfs/common/resource_budget.h"

namespace prepfs {

ResourceBudget::Take ResourceBudget::take(uint64_t amount, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (amount > total_) return Take::too_large;
  const auto fits = [&] { return used_ <= total_ && total_ - used_ >= amount; };
  if (fits()) {
    used_ += amount;
    return Take::taken;
  }
  waiting_++;
  const bool got = freed_.wait_for(lock, wait, fits);
  waiting_--;
  if (got) used_ += amount;
  const Take result = got ? Take::taken : amount > total_ ? Take::too_large : Take::timed_out;
  // The last waiter leaving (with its part, or timed out) may leave room that work ahead waits for.
  const bool idle = idle_locked(1);
  lock.unlock();
  if (idle) idle_.notify_one();
  return result;
}

bool ResourceBudget::take_if_idle(uint64_t amount) {
  std::lock_guard lock(mu_);
  if (!idle_locked(amount)) return false;
  used_ += amount;
  return true;
}

bool ResourceBudget::take_when_idle(uint64_t amount, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (!idle_.wait_for(lock, wait, [&] { return idle_locked(amount); })) return false;
  used_ += amount;
  const bool more = idle_locked(1);  // room for the next idle taker too: pass the wake-up on
  lock.unlock();
  if (more) idle_.notify_one();
  return true;
}

void ResourceBudget::set_total(uint64_t total) {
  bool idle;
  {
    std::lock_guard lock(mu_);
    total_ = total;
    idle = idle_locked(1);
  }
  freed_.notify_all();
  if (idle) idle_.notify_one();
}

uint64_t ResourceBudget::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

unsigned ResourceBudget::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

void ResourceBudget::give_back(uint64_t amount) {
  bool idle;
  {
    std::lock_guard lock(mu_);
    used_ -= amount;
    idle = idle_locked(1);
  }
  freed_.notify_all();
  if (idle) idle_.notify_one();  // nobody waits: the part may go to work ahead
}

uint64_t ResourceBudget::in_use() const {
  std::lock_guard lock(mu_);
  return used_;
}

ResourceBudget::Hold& ResourceBudget::Hold::operator=(Hold&& o) noexcept {
  if (this != &o) {
    reset();
    budget_ = o.budget_;
    amount_ = o.amount_;
    o.budget_ = nullptr;
  }
  return *this;
}

void ResourceBudget::Hold::reset() {
  if (budget_) budget_->give_back(amount_);
  budget_ = nullptr;
}

}  // namespace prepfs

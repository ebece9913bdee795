#include "prepfs/common/resource_budget.h"

namespace prepfs {

ResourceBudget::Take ResourceBudget::take(uint64_t amount, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (amount > total_) return Take::too_large;
  const auto fits = [&] { return used_ <= total_ && total_ - used_ >= amount; };
  if (!fits()) {
    waiting_++;
    const bool got = freed_.wait_for(lock, wait, fits);
    waiting_--;
    if (!got) return amount > total_ ? Take::too_large : Take::timed_out;
  }
  used_ += amount;
  return Take::taken;
}

bool ResourceBudget::take_if_idle(uint64_t amount) {
  std::lock_guard lock(mu_);
  if (waiting_ > 0 || used_ > total_ || total_ - used_ < amount) return false;
  used_ += amount;
  return true;
}

void ResourceBudget::set_total(uint64_t total) {
  {
    std::lock_guard lock(mu_);
    total_ = total;
  }
  freed_.notify_all();
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
  {
    std::lock_guard lock(mu_);
    used_ -= amount;
  }
  freed_.notify_all();
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

#include "prepfs/common/resource_budget.h"

namespace prepfs {

ResourceBudget::Take ResourceBudget::take(uint64_t amount, std::chrono::milliseconds wait) {
  if (amount > total_) return Take::too_large;
  std::unique_lock lock(mu_);
  if (!freed_.wait_for(lock, wait, [&] { return total_ - used_ >= amount; })) return Take::timed_out;
  used_ += amount;
  return Take::taken;
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

#include "prepfs/index/owner_table.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace prepfs {

OwnerTable::OwnerTable(const std::vector<Owner>& owners, size_t headroom)
    : capacity_(std::min<size_t>(owners.size() + headroom, kOverflow)) {
  slots_.reset(new std::atomic<uint64_t>[capacity_]);
  for (const Owner& o : owners) intern(o);
}

uint16_t OwnerTable::intern(const Owner& o) {
  if (auto it = index_.find(pack(o)); it != index_.end()) return it->second;
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n == capacity_) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      spdlog::warn("more than {} distinct owners in the source: the rest show as nobody:nogroup", capacity_);
    return kOverflow;
  }
  slots_[n].store(pack(o), std::memory_order_relaxed);
  index_.emplace(pack(o), static_cast<uint16_t>(n));
  count_.store(n + 1, std::memory_order_release);
  return static_cast<uint16_t>(n);
}

Owner OwnerTable::at(uint16_t index) const {
  if (index >= count_.load(std::memory_order_acquire)) return kNobody;
  uint64_t v = slots_[index].load(std::memory_order_relaxed);
  return Owner{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
}

std::vector<Owner> OwnerTable::all() const {
  std::vector<Owner> out;
  for (size_t i = 0, n = count_.load(std::memory_order_acquire); i < n; i++) out.push_back(at(uint16_t(i)));
  return out;
}

}  // namespace prepfs

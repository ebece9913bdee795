#include "prepfs/store/header_prober.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <vector>

namespace prepfs {

HeaderProber::HeaderProber(Tree& tree, SampleStore& store, unsigned threads, std::function<void()> on_complete)
    : tree_(tree), store_(store), threads_(std::max(1u, threads)), on_complete_(std::move(on_complete)) {
  if (complete()) {
    finished_ = true;
    return;
  }
  spdlog::info("image headers: {} to read while serving", tree_.unprobed_count());
  thread_ = std::thread([this] { background(); });
}

HeaderProber::~HeaderProber() { stop(); }

void HeaderProber::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HeaderProber::probe(uint32_t node) {
  if (tree_.dims(node).known() || !S_ISREG(tree_.node(node).mode)) return;
  try {
    store_.probe_head(store_.resolve(node));
  } catch (const std::exception& e) {
    // Unreadable now: not served as an image (as a full scan would have decided).
    spdlog::warn("{}: cannot read its header: {}", tree_.path(node), e.what());
    tree_.set_dims(node, ImageDims{});
  }
}

void HeaderProber::ensure(uint32_t node) { probe(node); }

void HeaderProber::ensure_dir(uint32_t dir, unsigned threads) {
  if (complete() || !tree_.is_dir(dir)) return;
  const Node& d = tree_.node(dir);
  std::vector<uint32_t> todo;
  for (uint32_t c = d.first_child; c < d.first_child + d.nchildren; c++)
    if (S_ISREG(tree_.node(c).mode) && !tree_.dims(c).known()) todo.push_back(c);
  if (todo.empty()) return;
  // Latency-bound on a remote source: as many readers as the source takes, not as cores.
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) probe(todo[i]);
  };
  const unsigned n = std::min<unsigned>(threads ? threads : threads_, static_cast<unsigned>(todo.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; t++) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

void HeaderProber::ensure_all() {
  if (complete()) return;
  for (uint32_t id = 0; id < tree_.size() && !complete(); id++)
    if (tree_.is_dir(id)) ensure_dir(id);
}

// In node order (directory by directory, as a listing walks them), a few at a time: it overlaps
// the first epoch rather than racing it for the source.
void HeaderProber::background() {
  for (uint32_t id = 0; id < tree_.size() && !stop_; id++)
    if (tree_.is_dir(id)) ensure_dir(id, std::min(threads_, 4u));
  if (stop_) return;
  spdlog::info("image headers: all known ({} images)", tree_.image_count());
  if (on_complete_) on_complete_();
  std::lock_guard lock(mu_);
  finished_ = true;
  done_cv_.notify_all();
}

}  // namespace prepfs

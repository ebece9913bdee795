#include "prepfs/store/header_prober.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "prepfs/index/image_probe.h"

namespace prepfs {
namespace {

// Runs fn(item) for every item with up to `threads` threads (the caller's among them): probes are
// latency-bound on a remote source, so as many as the source takes, not as cores.
template <class F>
void in_parallel(const std::vector<uint32_t>& items, unsigned threads, F&& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) fn(items[i]);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<unsigned>(threads, static_cast<unsigned>(items.size())); t++)
    pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

}  // namespace

HeaderProber::HeaderProber(Tree& tree, SampleStore& store, Source& source, unsigned threads)
    : tree_(tree), store_(store), source_(source), threads_(std::max(1u, threads)) {
  if (!complete()) spdlog::info("image headers: {} to read while serving", tree_.unprobed_count());
}

void HeaderProber::probe(uint32_t node, bool whole_chunk) {
  if (tree_.dims(node).known() || !S_ISREG(tree_.mode(node)) || waiting(node)) return;
  const Sample s = store_.resolve(node);  // the version the header is read from
  try {
    if (whole_chunk)
      store_.probe_head(s);
    else
      tree_.set_dims(node, s.version, probe_image(source_, s.path, s.version));
    read_ok(node);
  } catch (const std::exception& e) {
    failed(node, s.path, e);
  }
}

// Unreadable now (the source failed, not the file: a file that is no image is read fine and
// recorded as such): left unread, so not shown in decoded/ and augmented/ until a read succeeds.
void HeaderProber::failed(uint32_t node, const std::string& path, const std::exception& e) {
  size_t n;
  {
    std::lock_guard lock(failed_mu_);
    failed_[node] = Clock::now() + kRetryAfter;
    memo_ = {};
    n = failed_.size();
  }
  if (failure_log_.allow())
    spdlog::warn("{}: cannot read its header ({}); read again at a use {} s from now or later ({} file{} so far)",
                 path, e.what(), kRetryAfter.count(), n, n == 1 ? "" : "s");
}

bool HeaderProber::waiting(uint32_t node) const {
  std::lock_guard lock(failed_mu_);
  auto it = failed_.find(node);
  return it != failed_.end() && Clock::now() < it->second;
}

bool HeaderProber::nothing_due() {
  const uint64_t unread = tree_.unprobed_count();
  if (unread == 0) return true;
  std::lock_guard lock(failed_mu_);
  if (unread > failed_.size()) return false;  // a header no read has failed yet
  const auto now = Clock::now();
  if (memo_.unread == unread && memo_.failed == failed_.size() && now < memo_.until) return true;
  uint64_t waiting = 0;
  Clock::time_point first_due = Clock::time_point::max();
  for (auto it = failed_.begin(); it != failed_.end();) {
    if (tree_.dims(it->first).known()) {  // read since (a raw/ read of its first chunk)
      it = failed_.erase(it);
      continue;
    }
    if (now < it->second) {
      waiting++;
      first_due = std::min(first_due, it->second);
    }
    ++it;
  }
  if (unread != waiting) return false;
  memo_ = Memo{unread, failed_.size(), first_due};
  return true;
}

void HeaderProber::retry_failed_now() {
  std::lock_guard lock(failed_mu_);
  for (auto& [node, next_try] : failed_) next_try = Clock::now();
  memo_ = {};
}

void HeaderProber::unread_failed_at_mount() {
  std::lock_guard lock(failed_mu_);
  for (uint32_t id = 0; id < tree_.size(); id++)
    if (S_ISREG(tree_.mode(id)) && !tree_.dims(id).known()) failed_.emplace(id, Clock::now());
}

void HeaderProber::read_ok(uint32_t node) {
  std::lock_guard lock(failed_mu_);
  failed_.erase(node);
}

bool HeaderProber::settled() const {
  std::lock_guard lock(failed_mu_);
  uint64_t unread = 0;  // of those that failed, the ones still unread (a raw/ read may have read one since)
  for (const auto& [node, next_try] : failed_) unread += !tree_.dims(node).known();
  return tree_.unprobed_count() == unread;
}

void HeaderProber::ensure(uint32_t node) { probe(node, true); }

void HeaderProber::ensure_dir(uint32_t dir, unsigned threads) { probe_dir(dir, threads, true); }

void HeaderProber::probe_dir(uint32_t dir, unsigned threads, bool whole_chunks) {
  if (nothing_due() || !tree_.is_dir(dir)) return;
  const Node& d = tree_.node(dir);
  std::vector<uint32_t> todo;
  for (uint32_t c = d.first_child; c < d.first_child + d.nchildren; c++)
    if (S_ISREG(tree_.mode(c)) && !tree_.dims(c).known() && !waiting(c)) todo.push_back(c);
  in_parallel(todo, threads ? threads : threads_, [&](uint32_t node) { probe(node, whole_chunks); });
}

// Reading every first chunk here (kept only among the recent fills and the staging, a few MiB)
// fetched the whole dataset once before the job's first epoch fetched it again: the sample list
// of a 349 MB set of 3,000 JPEGs behind prepfs-slowfs cost 342 MB of source reads; header bytes
// only, 96 MB (16 KiB per file, plus the kernel's readahead on the slowfs mount).
void HeaderProber::ensure_all() {
  // probe_dir skips what waits out its retry (nothing_due per directory, O(1) once memoised).
  for (uint32_t id = 0; id < tree_.size() && !complete(); id++)
    if (tree_.is_dir(id)) probe_dir(id, threads_, false);
}

void HeaderProber::ensure_some(size_t count) {
  std::vector<uint32_t> unknown;
  for (uint32_t id = 0; id < tree_.size(); id++)
    if (S_ISREG(tree_.mode(id)) && !tree_.dims(id).known()) unknown.push_back(id);
  if (unknown.empty() || count == 0) return;
  std::vector<uint32_t> todo;
  const double stride = std::max(1.0, double(unknown.size()) / double(count));
  for (double i = 0; size_t(i) < unknown.size() && todo.size() < count; i += stride) todo.push_back(unknown[size_t(i)]);
  in_parallel(todo, threads_, [&](uint32_t node) {
    const Sample s = store_.resolve(node);  // the version the header is read from
    try {
      // Another node's first chunk when the shared tier has it; else the header bytes alone.
      std::optional<ImageDims> d = store_.dims_from_shared(s);
      tree_.set_dims(node, s.version, d ? *d : probe_image(source_, s.path, s.version));
      read_ok(node);
    } catch (const std::exception& e) {
      failed(node, s.path, e);
    }
  });
}

}  // namespace prepfs

#include "prepfs/cache/shared_tier.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <random>
#include <thread>

#include "prepfs/cache/shared_value.h"
#include "prepfs/common/log_limiter.h"

namespace prepfs {
namespace {

LogLimiter g_corrupt_log, g_timeout_log, g_publish_log, g_lookup_log;

// Who holds a lease, for whoever looks at memcached by hand, and which of its fills: the holder
// gives back only its own lease (remove_if), not one another node took once it expired.
std::string lease_value() {
  static std::atomic<uint64_t> fills{0};
  // Containers can share a host name and a pid: a random number per process tells them apart.
  static const uint64_t nonce = std::random_device{}() * 0x100000000ull + std::random_device{}();
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return fmt::format("{}:{}:{:016x}:{}", host, getpid(), nonce, ++fills);
}

}  // namespace

SharedTier::SharedTier(std::unique_ptr<KvStore> store, SharedTierConfig cfg) : store_(std::move(store)), cfg_(cfg) {
  cfg_.lease_ttl = std::max(cfg_.lease_ttl, std::chrono::milliseconds(1000));
  publisher_ = std::thread([this] { publishing_loop(); });
}

SharedTier::~SharedTier() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + cfg_.stop_grace;
  }
  queue_cv_.notify_all();
  publisher_.join();
}

uint64_t SharedTier::queue_cost(const Pending& p) {
  return (p.chunk ? p.chunk->size() : 0) + sizeof(Pending);  // an empty entry still costs its slot
}

void SharedTier::publish_later(Pending p) {
  try {
    std::lock_guard lock(queue_mutex_);
    if (stopping_) throw std::runtime_error("stopping");
    uint64_t cost = queue_cost(p);
    if (queue_bytes_ + cost > cfg_.publish_queue_bytes) {
      // Full (the servers take entries slower than this node fills them): the others fill this
      // one themselves rather than wait out a lease for an entry that will not come. The lease
      // goes back on the publishing thread too (a slow server must not hold this reader), unless
      // so many returns wait already that it is left to expire.
      bump(counters_.publish_dropped);
      if (g_publish_log.allow())
        spdlog::warn("shared tier: the publishing queue is full ({} bytes); a {} entry is not published",
                     cfg_.publish_queue_bytes, form_name(p.form));
      p.chunk = nullptr;
      cost = queue_cost(p);
      if (p.lease.empty() || queue_.size() >= kMaxQueued) return;
    }
    queue_bytes_ += cost;
    bump(counters_.publish_queued);
    bump(counters_.publish_queued_bytes, cost);
    // A lease return goes first: another node may be waiting on it.
    if (p.chunk)
      queue_.push_back(std::move(p));
    else
      queue_.push_front(std::move(p));
    queue_cv_.notify_one();
  } catch (...) {  // stopping, or out of memory: the lease expires; the reader has its bytes anyway
    bump(counters_.publish_dropped);
  }
}

void SharedTier::publishing_loop() {
  std::unique_lock lock(queue_mutex_);
  while (true) {
    queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    publishing_ = true;
    in_flight_ = {p.key, p.form, p.chunk, {}, {}};
    const bool stopping = stopping_;
    const bool past_grace = stopping && std::chrono::steady_clock::now() > stop_deadline_;
    const uint64_t cost = queue_cost(p);
    lock.unlock();
    // At shutdown only the leases go back: the others need not wait. Nor should they wait on a
    // backlog: past half the lease's TTL (from when it was taken) they are better off filling it
    // themselves. An entry without a chunk is only its lease to give back.
    try {
      if (p.chunk) {
        if (stopping || std::chrono::steady_clock::now() - p.since > cfg_.lease_ttl / 2)
          bump(counters_.publish_dropped);
        else
          publish(p.key, p.form, *p.chunk);
      }
      if (!p.lease.empty()) {
        if (past_grace) {
          // Left to expire: the stop does not wait on a slow server. (Not a dropped publish: its
          // entry, if any, counted as one above.)
        } else
          store_->remove_if(shared_lease_key(p.key, p.form), p.lease);
      }
    } catch (...) {  // out of memory: the lease expires; this thread must go on
      bump(counters_.errors_publishing);
    }
    p = {};  // the chunk's memory goes before the queue says it has room
    lock.lock();
    in_flight_ = {};
    queue_bytes_ -= cost;
    counters_.publish_queued.fetch_sub(1, std::memory_order_relaxed);
    counters_.publish_queued_bytes.fetch_sub(cost, std::memory_order_relaxed);
    publishing_ = false;
    if (queue_.empty()) drained_cv_.notify_all();
  }
}

ChunkRef SharedTier::queued(const CacheKey& key, Form form) {
  std::lock_guard lock(queue_mutex_);
  for (const Pending& p : queue_)  // a rare path (a lease found), over at most publish_queue_bytes
    if (p.chunk && p.key == key && p.form == form) return p.chunk;
  if (publishing_ && in_flight_.chunk && in_flight_.key == key && in_flight_.form == form) return in_flight_.chunk;
  return nullptr;
}

void SharedTier::drain() {
  std::unique_lock lock(queue_mutex_);
  drained_cv_.wait(lock, [&] { return queue_.empty() && !publishing_; });
}

void SharedTier::set_forms(const std::array<bool, kForms>& forms) {
  for (Form f : kAllForms) forms_[index_of(f)].store(forms[index_of(f)] && f != Form::augmented);
}

std::array<bool, kForms> SharedTier::forms() const {
  std::array<bool, kForms> out{};
  for (Form f : kAllForms) out[index_of(f)] = shares(f);
  return out;
}

ChunkRef SharedTier::assemble(const CacheKey& key, Form form, std::span<const char> head, bool* failed) {
  SharedCounters::PerForm& pf = counters_.by_form[index_of(form)];
  SharedAssembly a(key, form);
  const char* why = a.start(head);
  ChunkRef chunk;
  if (!why) {
    if (a.pieces() > 1) {
      std::vector<std::string> keys;
      for (uint32_t i = 1; i < a.pieces(); i++) keys.push_back(shared_piece_key(key, form, i));
      if (store_->get(keys, [&](size_t i, std::span<const char> v) { a.add(uint32_t(i + 1), v); }) ==
          KvResult::failed) {
        bump(pf.errors);
        *failed = true;
        return nullptr;
      }
    }
    chunk = a.finish(&why);
  }
  if (why) {
    // Evicted pieces are an ordinary miss; anything else is a value that is not what its name says.
    if (std::string_view(why) != "a piece is missing") {
      bump(pf.corrupt);
      if (g_corrupt_log.allow())
        spdlog::warn("shared tier: the {} entry {} is invalid ({}); fetched again", form_name(form), key.hex(), why);
    }
    store_->remove(shared_head_key(key, form));  // so that the next reader does not find it too
    return nullptr;
  }
  return chunk;
}

SharedTier::Found SharedTier::lookup(const CacheKey& key, Form form, ChunkRef* out) {
  SharedCounters::PerForm& pf = counters_.by_form[index_of(form)];
  const std::string keys[2] = {shared_head_key(key, form), shared_lease_key(key, form)};
  const uint64_t t0 = steady_ns();
  std::optional<ChunkRef> entry;
  bool leased = false, failed = false;
  KvResult r;
  try {
    r = store_->get(keys, [&](size_t i, std::span<const char> v) {
      if (i == 1) {
        leased = true;
        return;
      }
      entry = assemble(key, form, v, &failed);
    });
  } catch (const std::exception& e) {
    // Out of memory in the client or in assembling a large entry: the shared tier failed this
    // once, which sends the read to the source; it never becomes the reader's error.
    if (g_lookup_log.allow())
      spdlog::warn("shared tier: a {} lookup failed ({}); read from the source", form_name(form), e.what());
    bump(pf.errors);
    return Found::failed;
  }
  const uint64_t ns = steady_ns() - t0;
  bump(counters_.gets);
  bump(counters_.get_ns, ns);
  counters_.get_latency.record(ns);
  if (entry && *entry) {
    bump(counters_.hit_bytes, (*entry)->size());
    bump(counters_.hit_ns, ns);
    *out = std::move(*entry);
    return Found::entry;
  }
  if (r == KvResult::failed || failed) {
    if (r == KvResult::failed) bump(pf.errors);
    return Found::failed;
  }
  return leased ? Found::leased : Found::nothing;
}

ChunkRef SharedTier::get(const CacheKey& key, Form form) {
  ChunkRef c;
  if (lookup(key, form, &c) == Found::entry) {
    SharedCounters::PerForm& pf = counters_.by_form[index_of(form)];
    bump(pf.hits);
    bump(pf.hit_bytes, c->size());
    return c;
  }
  return nullptr;  // not a miss in the counters: nothing is filled for it here
}

void SharedTier::publish(const CacheKey& key, Form form, const Chunk& chunk) {
  // A courtesy to the other nodes: whatever goes wrong here (out of memory while splitting the
  // value), the reader that filled the chunk still gets it.
  try {
    store_entry(key, form, chunk);
  } catch (const std::exception& e) {
    bump(counters_.by_form[index_of(form)].errors);
    if (g_publish_log.allow()) spdlog::warn("shared tier: cannot publish a {} entry: {}", form_name(form), e.what());
  }
}

void SharedTier::store_entry(const CacheKey& key, Form form, const Chunk& chunk) {
  SharedCounters::PerForm& pf = counters_.by_form[index_of(form)];
  if (chunk.size() > kMaxSharedEntry) return;
  const SharedItems items = split_entry(key, form, chunk, store_->max_value_bytes());
  // The pieces before the head: a reader that finds the head finds the rest (unless evicted).
  for (size_t i = 0; i < items.rest.size(); i++)
    if (store_->set(shared_piece_key(key, form, uint32_t(i + 1)), items.rest[i]) != KvResult::ok) {
      bump(pf.errors);
      return;
    }
  if (store_->set(shared_head_key(key, form), items.head) != KvResult::ok) {
    bump(pf.errors);
    return;
  }
  bump(pf.published);
  bump(pf.published_bytes, chunk.size());
}

SharedTier::Result SharedTier::get_or_fill(const CacheKey& key, Form form, FunctionRef<ChunkRef()> fill) {
  SharedCounters::PerForm& pf = counters_.by_form[index_of(form)];
  const std::string lease = shared_lease_key(key, form);
  const uint32_t ttl_s = static_cast<uint32_t>((cfg_.lease_ttl.count() + 999) / 1000);
  const auto deadline = std::chrono::steady_clock::now() + cfg_.lease_ttl;
  auto poll = cfg_.first_poll;
  bool waited = false;
  auto hit = [&](ChunkRef c) {
    bump(pf.hits);
    bump(pf.hit_bytes, c->size());
    if (waited) bump(pf.lease_wait_hits);
    return Result{std::move(c), true};
  };
  while (true) {
    ChunkRef c;
    const Found found = lookup(key, form, &c);
    if (found == Found::entry) return hit(std::move(c));
    if (found == Found::failed) {  // the shared tier sits this one out; the fill is still ours
      bump(pf.misses);
      return Result{fill(), false};
    }
    if (found == Found::nothing) {
      const std::string me = lease_value();
      const KvResult took = store_->add(lease, me, ttl_s);
      if (took == KvResult::ok) {
        // Our lookup read the entry and the lease from two servers, not at one instant: a holder
        // may have published and let go in between. Look once more before fetching.
        ChunkRef late;
        if (lookup(key, form, &late) == Found::entry) {
          store_->remove_if(lease, me);
          return hit(std::move(late));
        }
        const auto leased_at = std::chrono::steady_clock::now();
        bump(pf.misses);
        bump(pf.leases);
        ChunkRef filled;
        try {
          filled = fill();
        } catch (...) {
          store_->remove_if(lease, me);  // the others need not wait for a fill that will not come
          throw;
        }
        publish_later(Pending{key, form, filled, me, leased_at});
        return Result{std::move(filled), false};
      }
      if (took == KvResult::failed) {
        bump(pf.errors);
        bump(pf.misses);
        return Result{fill(), false};
      }
      // refused: another node took it between our lookup and our add; wait for it below.
    }
    // Leased by this node: the entry may be in its own publishing queue (a re-read after RAM let
    // it go). Waiting on the lease would wait for its own publish.
    if (ChunkRef mine = queued(key, form)) return Result{std::move(mine), false};
    if (!waited) {
      waited = true;
      bump(pf.lease_waits);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // The holder died or is slower than the lease allows: fetch it here, and publish it (a
      // duplicate store of the same content is harmless).
      bump(pf.misses);
      bump(pf.lease_timeouts);
      if (g_timeout_log.allow())
        spdlog::warn("shared tier: waited {} ms for another node's fill of a {} entry; fetching it here",
                     cfg_.lease_ttl.count(), form_name(form));
      ChunkRef filled = fill();
      publish_later(Pending{key, form, filled, {}, std::chrono::steady_clock::now()});
      return Result{std::move(filled), false};
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, cfg_.max_poll);
  }
}

}  // namespace prepfs

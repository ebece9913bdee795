#include "prepfs/cache/memcached_store.h"

#include <libmemcached/memcached.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "prepfs/common/error.h"
#include "prepfs/common/log_limiter.h"
#include "prepfs/common/stats.h"

namespace prepfs {
namespace {

LogLimiter g_server_log;

// Answers that say nothing about the server's health: it answered.
bool answered(memcached_return_t rc) {
  switch (rc) {
    case MEMCACHED_SUCCESS:
    case MEMCACHED_END:
    case MEMCACHED_NOTFOUND:
    case MEMCACHED_NOTSTORED:
    case MEMCACHED_DATA_EXISTS:
    case MEMCACHED_STORED:
    case MEMCACHED_DELETED:
    case MEMCACHED_BUFFERED:
    // The server is there but refused this one item (out of memory, too large): not a reason to
    // skip it for the other keys.
    case MEMCACHED_SERVER_ERROR:
    case MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE:
    case MEMCACHED_E2BIG:
    case MEMCACHED_KEY_TOO_BIG:
    case MEMCACHED_BAD_KEY_PROVIDED:
    case MEMCACHED_MEMORY_ALLOCATION_FAILURE: return true;
    default: return false;
  }
}

uint64_t parse_u64(const char* v, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n && v[i] >= '0' && v[i] <= '9'; i++) x = x * 10 + uint64_t(v[i] - '0');
  return x;
}

std::string server_name(const SharedServer& s) {
  return (s.host.find(':') != std::string::npos ? "[" + s.host + "]" : s.host) + ":" + std::to_string(s.port);
}

}  // namespace

class MemcachedStore::Handle {
 public:
  explicit Handle(MemcachedStore& store) : store_(store), p_(store.borrow()) {}
  ~Handle() { store_.give_back(p_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  memcached_st* get() const { return p_.m; }

 private:
  MemcachedStore& store_;
  Pooled p_;
};

MemcachedStore::MemcachedStore(MemcachedConfig cfg)
    : cfg_(std::move(cfg)), health_(std::make_unique<Server[]>(cfg_.servers.size())) {
  if (cfg_.servers.empty()) throw Error(EINVAL, "shared tier: no memcached server given");
  master_ = memcached_create(nullptr);
  if (!master_) throw Error(ENOMEM, "shared tier: cannot create a memcached client");
  const uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(1, cfg_.timeout.count()));
  // Consistent hashing: every node computes the same server for a key from the same list, and
  // losing a server moves only its own keys.
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, ms);
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, ms);
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_SND_TIMEOUT, ms * 1000);
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, ms * 1000);
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  // Gets return each value's CAS token (remove_if needs it).
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
  // libmemcached's own per-handle failure memory, in whole seconds; ours (health_) is shared by
  // every handle and is what keeps a dead server from costing each thread its own timeout.
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT,
                         std::max<uint64_t>(1, uint64_t(cfg_.retry.count()) / 1000));
  memcached_behavior_set(master_, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 1);
  for (const SharedServer& s : cfg_.servers) {
    memcached_return_t rc = memcached_server_add(master_, s.host.c_str(), s.port);
    if (rc != MEMCACHED_SUCCESS) {
      memcached_free(master_);
      throw Error(EINVAL, "shared tier: cannot use memcached server " + server_name(s) + ": " +
                              memcached_strerror(nullptr, rc));
    }
  }
  for (const SharedServer& s : cfg_.servers) names_.push_back(server_name(s));
  stats_.resize(cfg_.servers.size());
  for (size_t i = 0; i < cfg_.servers.size(); i++) stats_[i].name = names_[i];
}

MemcachedStore::~MemcachedStore() {
  for (Pooled& p : idle_) memcached_free(p.m);
  memcached_free(master_);
}

MemcachedStore::Pooled MemcachedStore::borrow() {
  const uint64_t failures = failures_.load(std::memory_order_acquire);
  Pooled p{nullptr, failures};
  {
    std::lock_guard lock(pool_mu_);
    if (!idle_.empty()) {
      p = idle_.back();
      idle_.pop_back();
    }
  }
  if (!p.m) {
    p.m = memcached_clone(nullptr, master_);  // outside the lock: it allocates
    // Out of memory: the call fails (a miss, an unshared fill), as the store's calls never throw.
    if (!p.m && g_server_log.allow()) spdlog::warn("shared tier: cannot clone the memcached client (out of memory)");
  } else if (p.failures_seen != failures) {
    memcached_quit(p.m);  // reconnects on its next call
    p.failures_seen = failures;
  }
  return p;
}

void MemcachedStore::give_back(Pooled p) {
  if (!p.m) return;
  std::lock_guard lock(pool_mu_);
  idle_.push_back(p);
}

uint32_t MemcachedStore::server_of(memcached_st* m, const std::string& key) const {
  const uint32_t i = memcached_generate_hash(m, key.data(), key.size());
  return i < cfg_.servers.size() ? i : 0;
}

bool MemcachedStore::skipped(uint32_t server) const {
  return health_[server].down_until_ns.load(std::memory_order_relaxed) > steady_ns();
}

KvResult MemcachedStore::judge(uint32_t server, int code) {
  const auto rc = static_cast<memcached_return_t>(code);
  switch (rc) {
    case MEMCACHED_SUCCESS:
    case MEMCACHED_STORED:
    case MEMCACHED_DELETED:
    case MEMCACHED_END: return KvResult::ok;
    case MEMCACHED_NOTFOUND: return KvResult::missing;
    case MEMCACHED_NOTSTORED:
    case MEMCACHED_DATA_EXISTS: return KvResult::refused;
    default: break;
  }
  if (!answered(rc)) {
    Server& s = health_[server];
    const uint64_t until = steady_ns() + uint64_t(cfg_.retry.count()) * 1'000'000ull;
    s.down_until_ns.store(until, std::memory_order_relaxed);
    bump(s.failures);
    failures_.fetch_add(1, std::memory_order_release);
    if (g_server_log.allow())
      spdlog::warn(
          "shared tier: memcached server {} failed ({}); reads go to the source for its keys, retried in {} ms",
          names_[server], memcached_strerror(nullptr, rc), cfg_.retry.count());
  }
  return KvResult::failed;
}

KvResult MemcachedStore::get(std::span<const std::string> keys, OnValue on_value) {
  if (keys.empty()) return KvResult::ok;
  Handle h(*this);
  memcached_st* m = h.get();
  if (!m) return KvResult::failed;
  // Keys of servers marked down are not asked for: they read as failed at once.
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  std::vector<uint32_t> server(keys.size());
  bool failed = false;
  // The servers asked, each once: libmemcached reports a server it could not reach, or one that
  // never answered, as if its keys were absent, so each is checked by its pending answers.
  std::vector<uint32_t> asked;
  for (size_t i = 0; i < keys.size(); i++) {
    server[i] = server_of(m, keys[i]);
    if (skipped(server[i])) {
      failed = true;
      continue;
    }
    ptrs.push_back(keys[i].data());
    lens.push_back(keys[i].size());
    if (std::find(asked.begin(), asked.end(), server[i]) == asked.end()) asked.push_back(server[i]);
  }
  if (ptrs.empty()) return KvResult::failed;
  std::vector<bool> seen(keys.size());
  auto index_of_key = [&](std::string_view k) -> size_t {
    for (size_t i = 0; i < keys.size(); i++)
      if (!seen[i] && keys[i] == k) return i;
    return keys.size();
  };
  auto pending = [&](uint32_t s) { return memcached_server_response_count(memcached_server_instance_by_position(m, s)); };
  memcached_return_t rc = memcached_mget(m, ptrs.data(), lens.data(), ptrs.size());
  if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS) {
    // Sent to every server that owes an answer now; one owing none could not be connected or
    // written to (mget still succeeds when another server took the request).
    for (uint32_t s : asked)
      if (pending(s) == 0) {
        judge(s, MEMCACHED_CONNECTION_FAILURE);
        failed = true;
      }
    memcached_result_st result;
    memcached_result_create(m, &result);
    try {
      while (memcached_fetch_result(m, &result, &rc)) {
        const size_t i = index_of_key({memcached_result_key_value(&result), memcached_result_key_length(&result)});
        if (i == keys.size()) continue;  // not asked for (never expected)
        seen[i] = true;
        on_value(i, {memcached_result_value(&result), memcached_result_length(&result)});
      }
    } catch (...) {
      // The caller's callback threw (out of memory): the result's buffer is freed (it leaked),
      // and the connections, with the answers not fetched yet, are dropped.
      memcached_result_free(&result);
      memcached_quit(m);
      throw;
    }
    memcached_result_free(&result);
    // A server still owing its answer did not give it within the timeout (the fetch then ends as
    // if its keys were absent). Its late answer must not greet this handle's next request.
    bool late = false;
    for (uint32_t s : asked)
      if (pending(s) > 0) {
        judge(s, MEMCACHED_TIMEOUT);
        late = failed = true;
      }
    if (late) memcached_quit(m);
    // A connection that broke while answering is dropped (nothing pending), and the fetch call
    // that met it forgets the failure when another server's value follows; the handle's last
    // error (cleared by mget) still has it. Which server is not said reliably: the ones holding
    // keys that did not come back are the suspects, as below.
    const memcached_return_t last = memcached_last_error(m);
    if (!answered(last)) {
      failed = true;
      for (size_t i = 0; i < keys.size(); i++)
        if (!seen[i] && !skipped(server[i])) judge(server[i], last);
    }
  }
  if (!answered(rc) || (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND)) {
    // Which server failed is not said; the ones holding keys that did not come back are suspects.
    // (A healthy server among them is skipped for one retry period: some misses, no harm.)
    for (size_t i = 0; i < keys.size(); i++)
      if (!seen[i] && !skipped(server[i])) judge(server[i], rc);
    return KvResult::failed;
  }
  return failed ? KvResult::failed : KvResult::ok;
}

KvResult MemcachedStore::set(const std::string& key, std::span<const char> value) {
  Handle h(*this);
  if (!h.get()) return KvResult::failed;
  const uint32_t s = server_of(h.get(), key);
  if (skipped(s)) return KvResult::failed;
  return judge(s, memcached_set(h.get(), key.data(), key.size(), value.data(), value.size(), 0, 0));
}

KvResult MemcachedStore::add(const std::string& key, std::span<const char> value, uint32_t ttl_seconds) {
  Handle h(*this);
  if (!h.get()) return KvResult::failed;
  const uint32_t s = server_of(h.get(), key);
  if (skipped(s)) return KvResult::failed;
  return judge(s, memcached_add(h.get(), key.data(), key.size(), value.data(), value.size(), ttl_seconds, 0));
}

KvResult MemcachedStore::remove(const std::string& key) {
  Handle h(*this);
  if (!h.get()) return KvResult::failed;
  const uint32_t s = server_of(h.get(), key);
  if (skipped(s)) return KvResult::failed;
  return judge(s, memcached_delete(h.get(), key.data(), key.size(), 0));
}

KvResult MemcachedStore::remove_if(const std::string& key, std::span<const char> expected) {
  Handle h(*this);
  memcached_st* m = h.get();
  if (!m) return KvResult::failed;
  const uint32_t s = server_of(m, key);
  if (skipped(s)) return KvResult::failed;
  const char* k = key.data();
  const size_t klen = key.size();
  memcached_return_t rc = memcached_mget(m, &k, &klen, 1);
  if (rc != MEMCACHED_SUCCESS) return judge(s, rc);
  std::optional<uint64_t> cas;
  bool found = false;
  memcached_result_st result;
  memcached_result_create(m, &result);
  while (memcached_fetch_result(m, &result, &rc)) {
    found = true;
    const std::string_view value(memcached_result_value(&result), memcached_result_length(&result));
    if (value == std::string_view(expected.data(), expected.size())) cas = memcached_result_cas(&result);
  }
  memcached_result_free(&result);
  if (!answered(rc)) return judge(s, rc);
  if (!cas) return found ? KvResult::refused : KvResult::missing;
  // memcached has no conditional delete: an empty value that expires at once (a negative exptime),
  // stored only if the key is still the one read (its CAS token unchanged).
  return judge(s, memcached_cas(m, k, klen, "", 0, static_cast<time_t>(-1), 0, *cas));
}

uint64_t MemcachedStore::max_value_bytes() const {
  // memcached counts its item header (about 50 bytes), the key (at most 250) and the flags and
  // length suffix against -I; 1 KiB covers them all.
  return item_size_max_.load(std::memory_order_relaxed) - 1024;
}

std::vector<KvServerState> MemcachedStore::refresh_servers() {
  std::vector<KvServerState> fresh(cfg_.servers.size());
  for (size_t i = 0; i < fresh.size(); i++) fresh[i].name = names_[i];
  struct Context {
    MemcachedStore* self;
    std::vector<KvServerState>* out;
  } ctx{this, &fresh};
  auto on_stat = [](const memcached_instance_st* server, const char* key, size_t key_length, const char* value,
                    size_t value_length, void* context) -> memcached_return_t {
    auto* c = static_cast<Context*>(context);
    const std::string_view name(memcached_server_name(server));
    const in_port_t port = memcached_server_port(server);
    for (size_t i = 0; i < c->self->cfg_.servers.size(); i++) {
      const SharedServer& s = c->self->cfg_.servers[i];
      if (s.host != name || s.port != port) continue;
      KvServerState& st = (*c->out)[i];
      st.stats_known = true;
      const std::string_view k(key, key_length);
      const uint64_t v = parse_u64(value, value_length);
      if (k == "limit_maxbytes") st.memory_bytes = v;
      if (k == "extstore_limit_maxbytes") st.extstore_bytes = v;
      if (k == "bytes") st.used_bytes = v;
      if (k == "curr_items") st.items = v;
      if (k == "evictions") st.evictions = v;
      if (k == "item_size_max") st.item_size_max = v;
      break;
    }
    return MEMCACHED_SUCCESS;
  };
  {
    Handle h(*this);
    // Servers marked down are asked too: this is the once-in-a-while probe, bounded by the timeouts.
    if (h.get()) {
      memcached_stat_execute(h.get(), nullptr, on_stat, &ctx);
      memcached_stat_execute(h.get(), "settings", on_stat, &ctx);
    }
  }
  uint64_t item_size = 0;
  for (const KvServerState& s : fresh)
    if (s.item_size_max > 0) item_size = item_size == 0 ? s.item_size_max : std::min(item_size, s.item_size_max);
  if (item_size >= (64u << 10)) item_size_max_.store(item_size, std::memory_order_relaxed);
  {
    std::lock_guard lock(stats_mu_);
    stats_ = std::move(fresh);
  }
  return servers();
}

std::vector<KvServerState> MemcachedStore::servers() const {
  std::vector<KvServerState> out;
  {
    std::lock_guard lock(stats_mu_);
    out = stats_;
  }
  for (size_t i = 0; i < out.size(); i++) {
    out[i].up = !skipped(uint32_t(i));
    out[i].failures = load(health_[i].failures);
  }
  return out;
}

}  // namespace prepfs

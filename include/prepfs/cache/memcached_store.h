// KvStore over memcached servers through libmemcached: consistent hashing (ketama) spreads keys
// over the servers, so adding or losing one moves only its share of the keys.
//
// Every call is bounded: connect, poll, send and receive each time out after `timeout`. A server
// that fails a call (refused, reset, timed out) is skipped by every thread for `retry` (its keys
// read as failed at once, without a network round trip), then the next call tries it again: a
// dead server costs one timeout per retry period, not one per call, and a restarted one is used
// again within a period, with no remount. Keys are never moved to another server while one is
// down (no ejection): both sides of a partition would then hold different copies, and the
// content keys make a miss cheap anyway (the reader fetches from the source).
//
// memcached_st handles are not thread-safe: each call borrows one from a pool of clones of one
// configured handle, and gives it back.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "prepfs/cache/kv_store.h"
#include "prepfs/common/options.h"

struct memcached_st;

namespace prepfs {

struct MemcachedConfig {
  std::vector<SharedServer> servers;
  std::chrono::milliseconds timeout{250};  // of each connect, poll, send and receive
  std::chrono::milliseconds retry{1000};   // a failed server is skipped this long
};

class MemcachedStore final : public KvStore {
 public:
  // No network I/O: connections are made by the first calls.
  explicit MemcachedStore(MemcachedConfig cfg);
  ~MemcachedStore() override;
  MemcachedStore(const MemcachedStore&) = delete;
  MemcachedStore& operator=(const MemcachedStore&) = delete;

  KvResult get(std::span<const std::string> keys, OnValue on_value) override;
  KvResult set(const std::string& key, std::span<const char> value) override;
  KvResult add(const std::string& key, std::span<const char> value, uint32_t ttl_seconds) override;
  KvResult remove(const std::string& key) override;
  KvResult remove_if(const std::string& key, std::span<const char> expected) override;
  uint64_t max_value_bytes() const override;
  std::vector<KvServerState> refresh_servers() override;
  std::vector<KvServerState> servers() const override;

 private:
  class Handle;  // a pooled clone, given back on destruction
  struct Pooled {
    memcached_st* m;
    uint64_t failures_seen;  // failures_ when its connections were last dropped
  };
  Pooled borrow();
  void give_back(Pooled p);
  uint32_t server_of(memcached_st* m, const std::string& key) const;
  bool skipped(uint32_t server) const;      // marked down and its retry time not reached
  KvResult judge(uint32_t server, int rc);  // a call's return code, marking the server on failure

  MemcachedConfig cfg_;
  std::vector<std::string> names_;  // host:port of each server, for logs and stats
  memcached_st* master_ = nullptr;  // configured once; cloned, never used for calls
  std::mutex pool_mu_;
  std::vector<Pooled> idle_;
  // Server failures so far. A handle that has not seen the latest drops its connections when
  // borrowed: after a server died, a connection made to it before is dead too, and would fail
  // (and mark the server down again) once per pooled handle after the server is back.
  std::atomic<uint64_t> failures_{0};
  struct Server {
    std::atomic<uint64_t> down_until_ns{0};
    std::atomic<uint64_t> failures{0};
  };
  std::unique_ptr<Server[]> health_;  // by index in cfg_.servers (libmemcached's own order)
  mutable std::mutex stats_mu_;
  std::vector<KvServerState> stats_;               // as of the last refresh
  std::atomic<uint64_t> item_size_max_{1u << 20};  // memcached's default -I until a server says
};

}  // namespace prepfs

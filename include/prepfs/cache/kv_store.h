// What the shared tier needs of a distributed key-value store, and nothing more: bounded calls
// that never throw and never block past their timeout. MemcachedStore is the one real
// implementation; the interface exists so the shared tier's protocol (value layout, leases) is
// written once against it and its failures can be injected in tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "prepfs/common/function_ref.h"

namespace prepfs {

enum class KvResult : uint8_t {
  ok,
  missing,  // no such key
  refused,  // add: the key exists already
  failed,   // the server answered with an error, timed out, or is down (skipped for a while)
};

// One server as the store last saw it (its statistics are refreshed by refresh_servers()).
struct KvServerState {
  std::string name;  // host:port
  bool up = true;    // false while calls to it are skipped after a failure
  uint64_t failures = 0;
  uint64_t memory_bytes = 0;    // memcached -m (limit_maxbytes)
  uint64_t extstore_bytes = 0;  // memcached -o ext_path=...:SIZE (extstore_limit_maxbytes)
  uint64_t used_bytes = 0;      // bytes of items held in memory
  uint64_t items = 0;           // items held
  uint64_t evictions = 0;       // items the server dropped for room
  uint64_t item_size_max = 0;   // memcached -I
  bool stats_known = false;     // the last refresh reached it
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  using OnValue = FunctionRef<void(size_t index, std::span<const char> value)>;
  // Looks all keys up at once (one round trip per server involved); on_value gets each key found,
  // by its index in keys, with bytes valid only during the call. failed when a server could not
  // answer (its keys are simply not reported), else ok, whether found or not.
  virtual KvResult get(std::span<const std::string> keys, OnValue on_value) = 0;
  // Stores value under key without expiry (the store evicts by its own LRU).
  virtual KvResult set(const std::string& key, std::span<const char> value) = 0;
  // Stores value only if key is absent (else refused), expiring after ttl_seconds.
  virtual KvResult add(const std::string& key, std::span<const char> value, uint32_t ttl_seconds) = 0;
  virtual KvResult remove(const std::string& key) = 0;
  // Removes key only while it holds `expected` (ok); refused when it holds something else, missing
  // when it is gone. A lease's holder gives back its own lease, never one another node took after
  // it expired.
  virtual KvResult remove_if(const std::string& key, std::span<const char> expected) = 0;

  // The largest value one item may hold (item size less the key and the item's own header).
  virtual uint64_t max_value_bytes() const = 0;
  // Asks every server for its statistics (bounded by the timeouts; a dead one reports none).
  virtual std::vector<KvServerState> refresh_servers() = 0;
  // The states as of the last refresh, with the current up/down marks.
  virtual std::vector<KvServerState> servers() const = 0;
};

}  // namespace prepfs

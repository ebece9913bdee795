// The shared tier against real memcached servers started by the test (memcached_server.h): the
// value layout, the lease protocol between two "nodes" (two SharedTiers with their own clients),
// corruption, a dead lease holder, dead, hung and restarted servers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "memcached_server.h"
#include "prepfs/cache/memcached_store.h"
#include "prepfs/cache/shared_tier.h"
#include "prepfs/cache/shared_value.h"

using namespace prepfs;
using namespace std::chrono_literals;

namespace {

ChunkRef bytes_chunk(size_t n, uint32_t seed) {
  auto c = Chunk::allocate(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; i++) c->mutable_data()[i] = static_cast<char>(rng());
  return c;
}

bool same(const ChunkRef& a, const ChunkRef& b) {
  return a && b && a->size() == b->size() && std::memcmp(a->data(), b->data(), a->size()) == 0;
}

CacheKey key_of(uint64_t n) { return make_key(KeyFields{"train/x.jpg", FileVersion{n, 1, 2}, Form::raw}); }

std::unique_ptr<KvStore> client(std::vector<uint16_t> ports, std::chrono::milliseconds timeout = 250ms) {
  MemcachedConfig mc;
  for (uint16_t p : ports) mc.servers.push_back({"127.0.0.1", p});
  mc.timeout = timeout;
  return std::make_unique<MemcachedStore>(mc);
}

// One node's view of the shared tier, sharing raw and decoded.
std::unique_ptr<SharedTier> node(std::vector<uint16_t> ports, SharedTierConfig cfg = {}) {
  auto t = std::make_unique<SharedTier>(client(ports), cfg);
  t->set_forms({true, true, true});
  return t;
}

const SharedCounters::PerForm& of(const SharedTier& t, Form f) { return t.counters().by_form[index_of(f)]; }

}  // namespace

TEST(SharedValue, SplitAndReassembleEverySize) {
  const CacheKey k = key_of(1);
  const uint64_t max_value = 4096;
  for (size_t n : {size_t(0), size_t(1), size_t(4096 - kSharedHeadBytes), size_t(4096 - kSharedHeadBytes + 1),
                   size_t(3 * 4096 + 17), size_t(100000)}) {
    const ChunkRef c = bytes_chunk(n, uint32_t(n));
    const SharedItems items = split_entry(k, Form::decoded, *c, max_value);
    EXPECT_LE(items.head.size(), max_value);
    for (auto piece : items.rest) EXPECT_LE(piece.size(), max_value);
    SharedAssembly a(k, Form::decoded);
    ASSERT_EQ(a.start(items.head), nullptr) << n;
    ASSERT_EQ(a.pieces(), items.rest.size() + 1);
    for (size_t i = 0; i < items.rest.size(); i++) a.add(uint32_t(i + 1), items.rest[i]);
    const char* why = nullptr;
    EXPECT_TRUE(same(a.finish(&why), c)) << n << ": " << (why ? why : "");
  }
}

TEST(SharedValue, ForeignCorruptOrIncompleteValuesAreRefused) {
  const CacheKey k = key_of(1), other = key_of(2);
  const ChunkRef c = bytes_chunk(10000, 7);
  const SharedItems items = split_entry(k, Form::raw, *c, 4096);
  EXPECT_NE(SharedAssembly(other, Form::raw).start(items.head), nullptr);  // another key's value
  EXPECT_NE(SharedAssembly(k, Form::decoded).start(items.head), nullptr);  // another form's
  EXPECT_NE(SharedAssembly(k, Form::raw).start(std::string_view(items.head).substr(0, 40)), nullptr);
  std::string flipped_split = items.head;
  flipped_split[sizeof(SsdEntryHeader) + 4] ^= 1;  // the piece count
  EXPECT_NE(SharedAssembly(k, Form::raw).start(flipped_split), nullptr);

  auto finish_with = [&](std::string head, std::vector<std::string> rest) {
    SharedAssembly a(k, Form::raw);
    if (a.start(head)) return false;
    for (size_t i = 0; i < rest.size(); i++) a.add(uint32_t(i + 1), rest[i]);
    const char* why = nullptr;
    return a.finish(&why) != nullptr;
  };
  std::vector<std::string> rest;
  for (auto p : items.rest) rest.emplace_back(p.begin(), p.end());
  EXPECT_TRUE(finish_with(items.head, rest));
  std::string payload_flip = items.head;
  payload_flip.back() ^= 0x40;  // a payload byte in the head
  EXPECT_FALSE(finish_with(payload_flip, rest));
  auto bad = rest;
  bad[1][5] ^= 1;  // a payload byte of a piece
  EXPECT_FALSE(finish_with(items.head, bad));
  bad = rest;
  bad.pop_back();  // a piece evicted
  EXPECT_FALSE(finish_with(items.head, bad));
  bad = rest;
  bad[0].pop_back();  // a piece cut short
  EXPECT_FALSE(finish_with(items.head, bad));
}

TEST(SharedTier, WhatOneNodePublishesAnotherReads) {
  test::MemcachedServer a, b;
  auto n1 = node({a.port(), b.port()}), n2 = node({a.port(), b.port()});
  int fills = 0;
  for (uint64_t i = 0; i < 20; i++) {
    const ChunkRef c = bytes_chunk(1000 + i * 997, uint32_t(i));
    auto r1 = n1->get_or_fill(key_of(i), Form::raw, [&] {
      fills++;
      return c;
    });
    EXPECT_FALSE(r1.hit);
    auto r2 = n2->get_or_fill(key_of(i), Form::raw, [&]() -> ChunkRef {
      ADD_FAILURE() << "the second node fetched entry " << i;
      return c;
    });
    EXPECT_TRUE(r2.hit);
    EXPECT_TRUE(same(r2.chunk, c));
  }
  EXPECT_EQ(fills, 20);
  n1->drain();
  EXPECT_EQ(load(of(*n1, Form::raw).published), 20u);
  EXPECT_EQ(load(of(*n2, Form::raw).hits), 20u);
  // Both servers hold some: the keys are spread.
  auto servers = n1->store().refresh_servers();
  ASSERT_EQ(servers.size(), 2u);
  EXPECT_GT(servers[0].items, 0u);
  EXPECT_GT(servers[1].items, 0u);
  EXPECT_EQ(servers[0].item_size_max, 1u << 20);
  EXPECT_EQ(servers[0].memory_bytes, 64u << 20);
}

TEST(SharedTier, EntriesLargerThanAnItemAreSplitAndReadBack) {
  test::MemcachedServer a;  // -I 1m, the default
  auto n1 = node({a.port()}), n2 = node({a.port()});
  n1->store().refresh_servers();  // learns the item size
  const ChunkRef big = bytes_chunk(3 * (1u << 20) + 12345, 3);
  n1->publish(key_of(9), Form::decoded, *big);
  EXPECT_TRUE(same(n2->get(key_of(9), Form::decoded), big));
  EXPECT_EQ(n2->get(key_of(9), Form::raw), nullptr);  // another form is another entry
}

TEST(SharedTier, ConcurrentMissesOnTwoNodesFetchOnce) {
  test::MemcachedServer a, b;
  auto n1 = node({a.port(), b.port()}), n2 = node({a.port(), b.port()});
  std::atomic<int> fills{0};
  for (uint64_t i = 0; i < 10; i++) {
    const ChunkRef c = bytes_chunk(50000, uint32_t(i));
    // A slow source: the fill lasts until the other node waits on its lease (at most 5 s), so the
    // other node always arrives during it, however the two threads are scheduled.
    auto fill = [&]() -> ChunkRef {
      fills++;
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (load(of(*n1, Form::raw).lease_waits) + load(of(*n2, Form::raw).lease_waits) <= i &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(1ms);
      return c;
    };
    SharedTier::Result r1, r2;
    std::thread t1([&] { r1 = n1->get_or_fill(key_of(100 + i), Form::raw, fill); });
    std::thread t2([&] { r2 = n2->get_or_fill(key_of(100 + i), Form::raw, fill); });
    t1.join();
    t2.join();
    EXPECT_TRUE(same(r1.chunk, c));
    EXPECT_TRUE(same(r2.chunk, c));
    EXPECT_NE(r1.hit, r2.hit);  // one fetched, the other read what it published
  }
  EXPECT_EQ(fills.load(), 10);
  EXPECT_EQ(load(of(*n1, Form::raw).lease_waits) + load(of(*n2, Form::raw).lease_waits), 10u);
}

TEST(SharedTier, ACorruptValueIsAMissAndIsReplaced) {
  test::MemcachedServer a;
  auto n1 = node({a.port()}), n2 = node({a.port()});
  const ChunkRef c = bytes_chunk(70000, 5);
  n1->publish(key_of(5), Form::raw, *c);
  // Flip a payload byte inside memcached, through a plain client.
  auto raw = client({a.port()});
  std::string head;
  const std::string name = shared_head_key(key_of(5), Form::raw);
  raw->get(std::span(&name, 1), [&](size_t, std::span<const char> v) { head.assign(v.begin(), v.end()); });
  ASSERT_FALSE(head.empty());
  head[head.size() / 2] ^= 0x10;
  ASSERT_EQ(raw->set(name, head), KvResult::ok);

  int fills = 0;
  auto r = n2->get_or_fill(key_of(5), Form::raw, [&] {
    fills++;
    return c;
  });
  EXPECT_FALSE(r.hit);
  EXPECT_TRUE(same(r.chunk, c));  // the source's bytes, not the corrupt ones
  EXPECT_EQ(fills, 1);
  EXPECT_EQ(load(of(*n2, Form::raw).corrupt), 1u);
  // Refetched and published again: the next node reads a good value.
  n2->drain();
  auto n3 = node({a.port()});
  EXPECT_TRUE(same(n3->get(key_of(5), Form::raw), c));
}

TEST(SharedTier, ADeadLeaseHolderHoldsOthersOffAtMostTheLeaseTtl) {
  test::MemcachedServer a;
  SharedTierConfig cfg;
  cfg.lease_ttl = 2s;
  auto n2 = node({a.port()}, cfg);
  // A node took the lease and died before publishing.
  auto raw = client({a.port()});
  ASSERT_EQ(raw->add(shared_lease_key(key_of(7), Form::raw), std::string_view("dead:1"), 2), KvResult::ok);
  const ChunkRef c = bytes_chunk(1000, 7);
  int fills = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = n2->get_or_fill(key_of(7), Form::raw, [&] {
    fills++;
    return c;
  });
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(same(r.chunk, c));
  EXPECT_EQ(fills, 1);
  EXPECT_EQ(load(of(*n2, Form::raw).lease_waits), 1u);
  EXPECT_GE(waited, 900ms);        // it did wait for the holder (memcached counts whole seconds)
  EXPECT_LE(waited, 2s + 1500ms);  // ... and not past the lease's TTL
}

TEST(SharedTier, AFailingFillGivesTheLeaseBack) {
  test::MemcachedServer a;
  auto n1 = node({a.port()}), n2 = node({a.port()});
  EXPECT_THROW(n1->get_or_fill(key_of(8), Form::raw, []() -> ChunkRef { throw std::runtime_error("EIO"); }),
               std::runtime_error);
  const ChunkRef c = bytes_chunk(10, 8);
  auto r = n2->get_or_fill(key_of(8), Form::raw, [&] { return c; });
  EXPECT_TRUE(same(r.chunk, c));
  EXPECT_EQ(load(of(*n2, Form::raw).lease_waits), 0u);  // no lease left behind to wait for
}

// A fill that outlives its lease (memcached expired it, and another node took the key's lease):
// its holder gives back only its own lease. It used to delete the other node's, so that a third
// node found no lease and fetched too, while the second was still fetching.
TEST(SharedTier, AFillThatOutlivesItsLeaseLeavesTheNextHoldersLease) {
  test::MemcachedServer a;
  auto n1 = node({a.port()});
  auto raw = client({a.port()});
  const std::string lease = shared_lease_key(key_of(9), Form::raw);
  auto holder = [&] {
    std::string v = "none";
    raw->get(std::span<const std::string>(&lease, 1), [&](size_t, std::span<const char> b) { v.assign(b.data(), b.size()); });
    return v;
  };
  auto taken_over = [&] {
    ASSERT_EQ(raw->remove(lease), KvResult::ok);  // expired...
    ASSERT_EQ(raw->add(lease, std::string_view("node-b:1"), 60), KvResult::ok);  // ... and taken
  };
  EXPECT_THROW(n1->get_or_fill(key_of(9), Form::raw,
                               [&]() -> ChunkRef {
                                 taken_over();
                                 throw std::runtime_error("EIO");
                               }),
               std::runtime_error);
  EXPECT_EQ(holder(), "node-b:1") << "a failed fill removed the lease another node holds";
  ASSERT_EQ(raw->remove(lease), KvResult::ok);
  const ChunkRef c = bytes_chunk(10, 9);
  auto r = n1->get_or_fill(key_of(10), Form::raw, [&] {
    EXPECT_EQ(raw->remove(shared_lease_key(key_of(10), Form::raw)), KvResult::ok);
    EXPECT_EQ(raw->add(shared_lease_key(key_of(10), Form::raw), std::string_view("node-b:2"), 60), KvResult::ok);
    return c;
  });
  EXPECT_TRUE(same(r.chunk, c));
  n1->drain();  // the lease goes back after the entry is stored
  const std::string lease10 = shared_lease_key(key_of(10), Form::raw);
  std::string v;
  raw->get(std::span<const std::string>(&lease10, 1), [&](size_t, std::span<const char> b) { v.assign(b.data(), b.size()); });
  EXPECT_EQ(v, "node-b:2") << "a published fill removed the lease another node holds";
}

// A real store underneath, for fault injection in one call (override it).
class ForwardingStore : public KvStore {
 public:
  explicit ForwardingStore(std::unique_ptr<KvStore> inner) : inner_(std::move(inner)) {}
  KvResult get(std::span<const std::string> keys, OnValue on_value) override { return inner_->get(keys, on_value); }
  KvResult set(const std::string& key, std::span<const char> value) override { return inner_->set(key, value); }
  KvResult add(const std::string& key, std::span<const char> value, uint32_t ttl) override {
    return inner_->add(key, value, ttl);
  }
  KvResult remove(const std::string& key) override { return inner_->remove(key); }
  KvResult remove_if(const std::string& key, std::span<const char> expected) override {
    return inner_->remove_if(key, expected);
  }
  uint64_t max_value_bytes() const override { return inner_->max_value_bytes(); }
  std::vector<KvServerState> refresh_servers() override { return inner_->refresh_servers(); }
  std::vector<KvServerState> servers() const override { return inner_->servers(); }

 private:
  std::unique_ptr<KvStore> inner_;
};

// Stores that throw, as an allocation failure in the client would.
class ThrowingStores : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  KvResult set(const std::string&, std::span<const char>) override { throw std::bad_alloc(); }
};

// A slow server, for stores only: each set waits until the test opens the gate (or 10 s pass).
class GatedStores : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  KvResult set(const std::string& key, std::span<const char> value) override {
    {
      std::unique_lock lock(mutex_);
      waiting_++;
      cv_.notify_all();
      cv_.wait_for(lock, 10s, [&] { return open_; });
    }
    return ForwardingStore::set(key, value);
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait_for_a_set() {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, 10s, [&] { return waiting_ > 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

// Publishing is a courtesy to the other nodes: when it fails, the reader that filled still gets
// its bytes, and the lease goes. A throw there used to reach the reader as an error, with the
// lease held until its TTL.
TEST(SharedTier, APublishThatThrowsStillServesTheFillAndGivesTheLeaseBack) {
  test::MemcachedServer a;
  SharedTier n1(std::make_unique<ThrowingStores>(client({a.port()})));
  n1.set_forms({true, true, true});
  const ChunkRef c = bytes_chunk(1000, 11);
  SharedTier::Result r{nullptr, false};
  EXPECT_NO_THROW(r = n1.get_or_fill(key_of(11), Form::raw, [&] { return c; }));
  EXPECT_TRUE(same(r.chunk, c));
  n1.drain();
  EXPECT_GE(load(of(n1, Form::raw).errors), 1u);
  auto raw = client({a.port()});
  const std::string lease = shared_lease_key(key_of(11), Form::raw);
  size_t found = 0;
  raw->get(std::span<const std::string>(&lease, 1), [&](size_t, std::span<const char>) { found++; });
  EXPECT_EQ(found, 0u) << "the lease outlived the fill";
}

// A lookup that throws (out of memory in the client, or assembling a large entry) is a failed
// lookup: the read fills from the source. It used to reach the reader as an error.
class ThrowingGets : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  KvResult get(std::span<const std::string>, OnValue) override { throw std::bad_alloc(); }
};

TEST(SharedTier, ALookupThatThrowsFillsFromTheSource) {
  test::MemcachedServer a;
  SharedTier n1(std::make_unique<ThrowingGets>(client({a.port()})));
  n1.set_forms({true, true, true});
  const ChunkRef c = bytes_chunk(1000, 12);
  SharedTier::Result r{nullptr, false};
  EXPECT_NO_THROW(r = n1.get_or_fill(key_of(12), Form::raw, [&] { return c; }));
  EXPECT_TRUE(same(r.chunk, c));
  EXPECT_GE(load(of(n1, Form::raw).errors), 1u);
  EXPECT_EQ(load(of(n1, Form::raw).misses), 1u) << "a fill here while the shared tier failed is a miss filled here";
}

TEST(MemcachedStore, RemoveIfRemovesOnlyTheValueItExpects) {
  test::MemcachedServer a;
  auto store = client({a.port()});
  const std::string k = "lease";
  ASSERT_EQ(store->add(k, std::string_view("mine"), 60), KvResult::ok);
  EXPECT_EQ(store->remove_if(k, std::string_view("theirs")), KvResult::refused);
  size_t found = 0;
  auto count = [&](size_t, std::span<const char>) { found++; };
  ASSERT_EQ(store->get(std::span<const std::string>(&k, 1), count), KvResult::ok);
  EXPECT_EQ(found, 1u);
  EXPECT_EQ(store->remove_if(k, std::string_view("mine")), KvResult::ok);
  found = 0;
  ASSERT_EQ(store->get(std::span<const std::string>(&k, 1), count), KvResult::ok);
  EXPECT_EQ(found, 0u);
  EXPECT_EQ(store->remove_if(k, std::string_view("mine")), KvResult::missing);
  EXPECT_EQ(store->add(k, std::string_view("next"), 60), KvResult::ok) << "the key is free again";
}

TEST(SharedTier, ADeadServerDegradesToTheFillAndRecoversWhenBack) {
  auto a = std::make_unique<test::MemcachedServer>();
  const uint16_t port = a->port();
  auto n1 = node({port});
  const ChunkRef c = bytes_chunk(5000, 1);
  a->stop();
  int fills = 0;
  auto fill = [&] {
    fills++;
    return c;
  };
  for (int i = 0; i < 5; i++) {
    auto r = n1->get_or_fill(key_of(200 + uint64_t(i)), Form::raw, fill);
    EXPECT_TRUE(same(r.chunk, c));
  }
  EXPECT_EQ(fills, 5);
  EXPECT_GE(load(of(*n1, Form::raw).errors), 1u);
  EXPECT_FALSE(n1->store().servers()[0].up);
  // Back on the same port: within the retry period (1 s) the tier is used again.
  a = std::make_unique<test::MemcachedServer>(std::vector<std::string>{}, port);
  bool published = false;
  for (int i = 0; i < 60 && !published; i++) {
    std::this_thread::sleep_for(100ms);
    n1->get_or_fill(key_of(300 + uint64_t(i)), Form::raw, fill);
    published = load(of(*n1, Form::raw).published) > 0;
  }
  EXPECT_TRUE(published);
  EXPECT_TRUE(n1->store().servers()[0].up);
}

// One get over two servers, one of them hung or gone (its connection broke while idle, and the
// get meets that while reading its answer; or it refuses the connection): libmemcached ends such
// a get as if that server's keys were absent (the other server took the request). That used to
// read as misses:
// the server was never marked down, every later get paid its timeout again, and the shared tier
// removed entries whose pieces were merely late.
TEST(MemcachedStore, AGetFailsAndMarksDownAServerThatCannotAnswer) {
  for (const bool hung : {true, false}) {
    test::MemcachedServer a, b;
    auto store = client({a.port(), b.port()}, 1000ms);
    std::vector<std::string> keys;
    for (int i = 0; i < 32; i++) {
      keys.push_back("key" + std::to_string(i));
      ASSERT_EQ(store->set(keys.back(), std::string_view("v")), KvResult::ok);
    }
    size_t found = 0;
    auto count = [&](size_t, std::span<const char>) { found++; };
    ASSERT_EQ(store->get(keys, count), KvResult::ok);
    ASSERT_EQ(found, keys.size());
    // Gone: its connection broke while idle, and the get meets that while reading its answer.
    if (hung)
      b.pause();
    else
      b.stop();
    found = 0;
    EXPECT_EQ(store->get(keys, count), KvResult::failed) << (hung ? "hung" : "gone");
    EXPECT_GT(found, 0u) << "the other server's keys still come";
    EXPECT_LT(found, keys.size());
    EXPECT_TRUE(store->servers()[0].up);
    EXPECT_FALSE(store->servers()[1].up) << (hung ? "hung" : "gone");
    if (hung) b.resume();
  }
}

TEST(SharedTier, AHungServerCostsOneTimeoutThenIsSkipped) {
  test::MemcachedServer a;
  MemcachedConfig mc;
  mc.servers = {{"127.0.0.1", a.port()}};
  mc.timeout = 200ms;
  SharedTier n1(std::make_unique<MemcachedStore>(mc));
  n1.set_forms({true, false, false});
  const ChunkRef c = bytes_chunk(5000, 1);
  n1.publish(key_of(1), Form::raw, *c);
  a.pause();
  int fills = 0;
  auto fill = [&] {
    fills++;
    return c;
  };
  auto r = n1.get_or_fill(key_of(1), Form::raw, fill);  // times out, then the fill serves it
  EXPECT_TRUE(same(r.chunk, c));
  EXPECT_FALSE(r.hit);
  EXPECT_FALSE(n1.store().servers()[0].up);
  const uint64_t errors = load(n1.counters().by_form[0].errors);
  for (int i = 0; i < 10; i++) n1.get_or_fill(key_of(1), Form::raw, fill);  // skipped: no call made
  EXPECT_EQ(fills, 11);
  EXPECT_EQ(load(n1.counters().by_form[0].errors), errors + 10);
  // One lookup waited for the timeout; the ten after it were skipped without a call.
  const LatencyHistogram& h = n1.counters().get_latency;
  uint64_t slow = 0;
  for (int i = 0; i < LatencyHistogram::kBuckets; i++)
    if (i == LatencyHistogram::kBuckets - 1 || LatencyHistogram::kBoundsNs[i] > 100'000'000)
      slow += h.buckets[i].load();
  EXPECT_EQ(slow, 1u);
  a.resume();
}

// Publishing waits on no reader: a miss's bytes go to the reader while the store is still under
// way (it used to wait for every set and the lease's removal), and the other nodes, seeing the
// lease, wait for the entry rather than fetch it too.
TEST(SharedTier, AReaderDoesNotWaitForItsFillToBePublished) {
  test::MemcachedServer a;
  auto gated = std::make_unique<GatedStores>(client({a.port()}));
  GatedStores* gate = gated.get();
  SharedTier n1(std::move(gated));
  n1.set_forms({true, true, true});
  auto n2 = node({a.port()});
  const ChunkRef c = bytes_chunk(70000, 21);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = n1.get_or_fill(key_of(21), Form::raw, [&] { return c; });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the reader waited for the publish (the gate's 10 s)";
  EXPECT_TRUE(same(r.chunk, c));
  ASSERT_TRUE(gate->wait_for_a_set());
  EXPECT_EQ(load(n1.counters().publish_queued), 1u);
  std::thread opener([&] {
    std::this_thread::sleep_for(100ms);
    gate->open();
  });
  auto r2 = n2->get_or_fill(key_of(21), Form::raw, [&]() -> ChunkRef {
    ADD_FAILURE() << "the second node fetched while the first was publishing";
    return c;
  });
  opener.join();
  EXPECT_TRUE(r2.hit);
  EXPECT_TRUE(same(r2.chunk, c));
  n1.drain();
  EXPECT_EQ(load(of(n1, Form::raw).published), 1u);
  EXPECT_EQ(load(n1.counters().publish_queued), 0u);
  EXPECT_EQ(load(n1.counters().publish_queued_bytes), 0u);
}

// The queue holds at most publish_queue_bytes: past that, an entry is not published and its lease
// goes back (first in the queue), so that the other nodes fill it themselves instead of waiting.
TEST(SharedTier, AFullPublishingQueueDropsTheEntryAndGivesItsLeaseBack) {
  test::MemcachedServer a;
  auto gated = std::make_unique<GatedStores>(client({a.port()}));
  GatedStores* gate = gated.get();
  SharedTierConfig cfg;
  cfg.publish_queue_bytes = 250000;
  SharedTier n1(std::move(gated), cfg);
  n1.set_forms({true, true, true});
  auto raw = client({a.port()});
  auto leased = [&](uint64_t k) {
    const std::string lease = shared_lease_key(key_of(k), Form::raw);
    size_t found = 0;
    raw->get(std::span<const std::string>(&lease, 1), [&](size_t, std::span<const char>) { found++; });
    return found == 1;
  };
  for (uint64_t k = 30; k < 35; k++)  // 100 KB each: two fit, the one being stored included
    n1.get_or_fill(key_of(k), Form::raw, [&] { return bytes_chunk(100000, uint32_t(k)); });
  EXPECT_LE(load(n1.counters().publish_queued_bytes), cfg.publish_queue_bytes);
  EXPECT_EQ(load(n1.counters().publish_dropped), 3u);
  ASSERT_TRUE(gate->wait_for_a_set());
  EXPECT_TRUE(leased(30)) << "the entry being published keeps its lease";
  gate->open();
  n1.drain();
  for (uint64_t k = 30; k < 35; k++) EXPECT_FALSE(leased(k)) << k;
  EXPECT_EQ(load(of(n1, Form::raw).published), 2u);
}

// Behind a slow server the queue must not hold leases long: the other nodes wait on a lease, and
// past half its TTL they are better off filling the entry themselves.
TEST(SharedTier, AnEntryQueuedPastHalfItsLeaseTtlIsDroppedAndItsLeaseGivenBack) {
  test::MemcachedServer a;
  auto gated = std::make_unique<GatedStores>(client({a.port()}));
  GatedStores* gate = gated.get();
  SharedTierConfig cfg;
  // Long enough that the lease cannot expire by itself before the check (memcached's clock has
  // 1 s steps): its absence then is the give-back.
  cfg.lease_ttl = 8s;
  SharedTier n1(std::move(gated), cfg);
  n1.set_forms({true, true, true});
  for (uint64_t k = 40; k < 42; k++) n1.get_or_fill(key_of(k), Form::raw, [&] { return bytes_chunk(1000, 40); });
  ASSERT_TRUE(gate->wait_for_a_set());  // entry 40 is being stored; 41 waits behind it
  std::this_thread::sleep_for(4200ms);    // past half the TTL
  auto raw = client({a.port()});
  const std::string lease = shared_lease_key(key_of(41), Form::raw);
  auto lease_held = [&] {
    size_t found = 0;
    raw->get(std::span<const std::string>(&lease, 1), [&](size_t, std::span<const char>) { found++; });
    return found == 1;
  };
  ASSERT_TRUE(lease_held()) << "the lease is gone before the queue reached its entry";
  gate->open();
  n1.drain();
  EXPECT_EQ(load(of(n1, Form::raw).published), 1u);
  EXPECT_EQ(load(n1.counters().publish_dropped), 1u);
  EXPECT_FALSE(lease_held()) << "the dropped entry kept its lease";
}

// At stop, lease returns still queued past stop_grace are left to expire: behind a slow server
// each return is a call of up to shared_timeout, and the stop waited for every one queued.
class GatedCountingStores : public GatedStores {
 public:
  // removes: the test's own, which outlives the store (the tier owns and destroys it).
  GatedCountingStores(std::unique_ptr<KvStore> inner, std::atomic<int>& removes)
      : GatedStores(std::move(inner)), removes_(removes) {}
  KvResult remove_if(const std::string& key, std::span<const char> expected) override {
    removes_++;
    return GatedStores::remove_if(key, expected);
  }

 private:
  std::atomic<int>& removes_;
};

TEST(SharedTier, AStopGivesBackQueuedLeasesOnlyWithinItsGrace) {
  test::MemcachedServer a;
  std::atomic<int> removes{0};
  auto gated = std::make_unique<GatedCountingStores>(client({a.port()}), removes);
  GatedCountingStores* store = gated.get();
  SharedTierConfig cfg;
  cfg.stop_grace = 0ms;
  auto n1 = std::make_unique<SharedTier>(std::move(gated), cfg);
  n1->set_forms({true, true, true});
  for (uint64_t k = 60; k < 65; k++) n1->get_or_fill(key_of(k), Form::raw, [&] { return bytes_chunk(1000, 60); });
  ASSERT_TRUE(store->wait_for_a_set());  // entry 60 is being stored; four wait behind it
  // The gate opens only once the stop has begun: entry 60, taken before it, gives its lease
  // back; the four still queued are past the grace.
  std::thread opener([&] {
    std::this_thread::sleep_for(200ms);
    store->open();
  });
  n1.reset();
  opener.join();
  EXPECT_EQ(removes.load(), 1) << "the stop gave back leases past its grace";
}

// A re-read on the node whose publish is still queued (RAM let the entry go meanwhile) finds its
// own lease: it is served from the queue instead of waiting for its own publish.
TEST(SharedTier, AReReadOfAnEntryStillQueuedIsServedFromTheQueue) {
  test::MemcachedServer a;
  auto gated = std::make_unique<GatedStores>(client({a.port()}));
  GatedStores* gate = gated.get();
  SharedTier n1(std::move(gated));
  n1.set_forms({true, true, true});
  const ChunkRef c = bytes_chunk(5000, 50), d = bytes_chunk(6000, 51);
  n1.get_or_fill(key_of(50), Form::raw, [&] { return c; });
  n1.get_or_fill(key_of(51), Form::raw, [&] { return d; });  // queued behind 50, whose set waits
  ASSERT_TRUE(gate->wait_for_a_set());
  for (const auto& [k, want] : {std::pair{50, c}, std::pair{51, d}}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = n1.get_or_fill(key_of(uint64_t(k)), Form::raw, [&]() -> ChunkRef {
      ADD_FAILURE() << "filled again";
      return want;
    });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << k;
    EXPECT_TRUE(same(r.chunk, want)) << k;
  }
  gate->open();
  n1.drain();
}

// The SSD tier: one file per chunk under DIR/chunks/XX/, each self-describing (format version,
// key, length, xxHash3 of the payload), so a torn write or a flipped bit is detected on read and
// becomes a miss; never wrong bytes. Writes are queued to a background writer so a miss is
// answered as soon as the source delivered; the queue is bounded and sheds load when the disk
// is slower than the source. Reads and writes go through io_uring. Survives restarts: the index
// is rebuilt from the directory at start.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/tier_index.h"
#include "prepfs/common/stats.h"

namespace prepfs {

struct SsdEntryHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint64_t key_hi;
  uint64_t key_lo;
  uint64_t length;
  uint64_t checksum;  // XXH3_64 of the payload, seeded with key_lo
  uint8_t form;
  uint8_t reserved[7];
  uint64_t header_checksum;  // XXH3_64 of the bytes above
};
static_assert(sizeof(SsdEntryHeader) == 64);

class SsdTier {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  // Room for a burst of misses (a cold epoch over a fast source) without dropping admissions.
  static constexpr uint64_t kMaxPendingBytes = 256ull << 20;

  // dir is created if needed. Throws Error when it cannot be created or written.
  SsdTier(const std::string& dir, uint64_t budget, std::unique_ptr<EvictionPolicy> policy, TierCounters& counters,
          SampleResidency* residency = nullptr);
  ~SsdTier();  // drains the write queue, so a clean stop leaves every admitted chunk on disk

  // null on a miss, and on a corrupt entry (then removed). An entry found on disk at start learns
  // its sample on its first hit.
  ChunkRef get(const CacheKey& key, uint32_t sample = kNoSample);
  // Queues a write; false when the queue is full (the entry is simply not cached on SSD).
  bool put_async(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample = kNoSample);
  void sample_changed(uint32_t sample);
  void erase(const CacheKey& key);
  void set_form_quotas(const std::array<uint64_t, kForms>& quotas);
  void flush();  // waits until the queue is empty
  void clear();  // removes every entry

  TierStats stats() const;  // budget, bytes and entries, per form too, in one snapshot
  bool contains(const CacheKey& key) const;
  uint64_t queued_bytes();                                    // bytes waiting in the write queue
  size_t queued_jobs();                                       // entries waiting in the write queue
  std::string path_of(const CacheKey& key, Form form) const;  // for tests and tools

 private:
  struct Job {
    CacheKey key;
    ChunkRef chunk;
    Form form;
    uint32_t sample;
  };
  void load_existing();
  void writer_loop();
  void write_entry(const Job& job);
  void unlink_keys(const std::vector<CacheKey>& keys);
  std::string find_path(const CacheKey& key) const;  // whichever form suffix exists

  std::string dir_;
  TierCounters& counters_;

  mutable std::mutex mu_;  // guards index_, pending_, forms_
  TierIndex index_;
  std::unordered_set<CacheKey, CacheKeyHash> pending_;  // admitted, not yet renamed into place
  std::unordered_map<CacheKey, Form, CacheKeyHash> forms_;
  // Erased while the writer had them in hand: the writer drops them instead of landing them.
  std::unordered_set<CacheKey, CacheKeyHash> doomed_;
  bool full_logged_ = false;

  std::mutex q_mu_;
  std::condition_variable q_cv_, idle_cv_;
  std::deque<Job> queue_;
  uint64_t queued_bytes_ = 0;
  bool busy_ = false;
  CacheKey writing_{};  // the job the writer took, while busy_
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace prepfs

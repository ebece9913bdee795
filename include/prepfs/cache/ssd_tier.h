// The SSD tier: one self-describing file per chunk (cache/ssd_entry.h) in a private directory
// reached only by descriptor (cache/ssd_dir.h), so a torn write or a flipped bit is detected on
// read and becomes a miss, never wrong bytes. Writes are queued to one background writer so a miss
// is answered as soon as the source delivered; the queue is bounded (bytes and entries) and sheds
// load when the disk is slower than the source. Survives restarts: the index is rebuilt from the
// directory at start.
//
// Two kinds of entries share the budget. Planned entries are what the partition places here
// (per-form quotas apply). Spare copies are what the RAM tier holds, written while the budget has
// room so that a restart starts warm: they use only the room planned entries leave free, are the
// first to go when a planned entry needs it (then the oldest spare first), are outside the quotas,
// and are files of their own name (".spare"), so a restart tells them apart.
//
// No file-system call happens under the tier's lock, and every wait is bounded.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "prepfs/cache/chunk.h"
#include "prepfs/cache/ssd_dir.h"
#include "prepfs/cache/ssd_entry.h"
#include "prepfs/cache/tier_index.h"
#include "prepfs/common/log_limiter.h"
#include "prepfs/common/stats.h"

namespace prepfs {

struct SsdTierOptions {
  // Room for a burst of misses (a cold epoch over a fast source) without dropping admissions;
  // spare copies get half of it, so they never crowd out planned writes.
  uint64_t max_pending_bytes = 256ull << 20;
  size_t max_pending_jobs = 65536;
  // After the disk filled up (ENOSPC) the budget is lowered to what fits; free space is probed
  // again this often and the budget grows back (never above the configured one).
  std::chrono::milliseconds reprobe_interval{30'000};
  // How long the destructor waits for queued writes before dropping them.
  std::chrono::milliseconds drain_timeout{10'000};
  // Fault injection for tests: an errno to fail the next entry write with (0: none), and the free
  // space the re-probe sees (default: statvfs of the directory).
  std::function<int(const CacheKey&)> write_fault;
  std::function<uint64_t()> free_bytes;
  // Test seams: called when the writer has taken a job, before it looks at it, and once it is done
  // with it, before it takes the next one. An erase sees the job in the writer's hands at both.
  // (They run on the writer thread: one that waits for flush() never returns.)
  std::function<void(const CacheKey&)> job_taken;
  std::function<void(const CacheKey&)> job_done;
  // Test seam: called before each entry file is unlinked, on the thread that unlinks it, with the
  // file's key (its entry is already forgotten then).
  std::function<void(const CacheKey&)> before_unlink;
  // Test seam: called on the writer thread when a publish has to wait for unlinks of its key
  // under way, just before it waits.
  std::function<void(const CacheKey&)> waits_for_unlink;
  // Test seam: called on a reader's thread when get() is about to drop the entry it could not use
  // (its file missing or corrupt).
  std::function<void(const CacheKey&)> before_drop;
};

struct SpareStats {
  uint64_t bytes = 0;
  size_t entries = 0;
};

class SsdTier {
 public:
  // dir is created if needed (mode 0700) and must be private. Throws Error when it cannot be
  // created, written, or trusted.
  // residency (may be null) counts each sample's entries over all tiers.
  SsdTier(const std::string& dir, uint64_t budget, std::unique_ptr<EvictionPolicy> policy, TierCounters& counters,
          SsdTierOptions opts = {}, SampleResidency* residency = nullptr);
  ~SsdTier();  // lands queued writes (for at most drain_timeout), so a clean stop keeps them

  // null on a miss, and on a corrupt entry (then removed). An entry found on disk at start learns
  // its sample on its first hit.
  ChunkRef get(const CacheKey& key, uint32_t sample = kNoSample);
  // Queues a write of a planned entry; false when the queue is full (the entry is simply not
  // cached on SSD).
  bool put_async(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample = kNoSample);
  void sample_changed(uint32_t sample);  // its next use changed: re-rank its planned entries
  // Queues a spare copy of an entry the RAM tier holds; false when there is no room for it (in the
  // budget planned entries leave free, or in its half of the queue). It never touches the file
  // system; while a full disk keeps the budget low it refuses every spare, so a caller that queues
  // spares calls probe_room_if_due() too (outside its own locks).
  bool put_spare_async(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample = kNoSample);
  // After a full disk lowered the budget: looks at the disk's free space once per
  // reprobe_interval, and raises the budget when room came back. A statvfs, which can block: the
  // writer calls it before each write, and TierManager before it queues a spare, both outside
  // any lock of theirs.
  void probe_room_if_due();
  void erase(const CacheKey& key);
  // Each form's share (0..1) of the budget, as per-form quotas that follow the budget when it
  // moves (a full disk lowers it, room coming back raises it). Quotas set in bytes from a lowered
  // budget stayed there, and a form at its quota refuses: ssd= was never reached again.
  void set_form_shares(const std::array<double, kForms>& shares);
  // Waits until the queue is empty and the writer idle, at most `timeout`; false on a timeout.
  bool flush(std::chrono::milliseconds timeout = std::chrono::minutes(1));
  // Removes every entry at once, without waiting for the queue: queued writes are dropped, the one
  // the writer has in hand is doomed (it removes it when done).
  void clear();

  TierStats stats() const;  // planned entries: budget (as lowered when full), bytes, per form
  SpareStats spare_stats() const;
  bool contains(const CacheKey& key) const;        // a planned entry
  bool contains_spare(const CacheKey& key) const;  // a spare copy
  uint64_t queued_bytes();                         // bytes waiting in the write queue
  size_t queued_jobs();                            // entries waiting in the write queue
  // Where an entry's file is (for tests and tools).
  std::string path_of(const CacheKey& key, Form form, bool spare = false) const;

 private:
  struct Job {
    CacheKey key;
    ChunkRef chunk;
    Form form;
    bool spare;
    uint32_t sample;
    uint64_t taken = 0;  // the writer's count of jobs taken, this one included (set when taken)
  };
  using Names = std::vector<std::pair<CacheKey, std::string>>;  // files to unlink

  bool enqueue(Job job, uint64_t queue_limit);
  void load_existing();
  void writer_loop();
  void write_entry(const Job& job);
  int write_file(const Job& job);  // the temporary file, then the rename; 0 or the errno
  void unlink_all(const Names& names);
  // Before a publish: waits until no file of the key is being unlinked. A file name is fixed per
  // key, so an unlink of the forgotten old entry that came late would remove the new one.
  void wait_for_unlinks(const CacheKey& key);

  // Under mu_: index changes, each collecting the files to unlink once the lock is dropped.
  bool admit_planned(const Job& job, uint64_t size, Names* gone);
  bool admit_spare(const Job& job, uint64_t size, Names* gone);
  void forget(const CacheKey& key, Names* gone);  // from whichever index holds it
  void to_unlink(const CacheKey& key, std::string file, Names* gone);  // counted in unlinking_
  void collect(const std::vector<CacheKey>& evicted, Names* gone);
  void set_budget(uint64_t budget, Names* gone);

  SsdTierOptions opts_;
  SsdDir dir_;
  TierCounters& counters_;
  const uint64_t configured_budget_;
  std::optional<std::array<double, kForms>> shares_;  // under mu_; none: no per-form quotas

  mutable std::mutex mu_;  // guards everything down to the queue's own lock
  TierIndex planned_;
  TierIndex spare_;                                              // LRU; its budget is what planned_ leaves free
  // Every indexed or pending key's file, and the admitted write that made it (0: found at
  // start-up), so a reader that could not use one entry never drops a newer one of its key.
  struct Named {
    EntryName name;
    uint64_t write = 0;
  };
  std::unordered_map<CacheKey, Named, CacheKeyHash> names_;
  uint64_t writes_ = 0;  // admitted writes so far, numbering Named::write
  std::unordered_set<CacheKey, CacheKeyHash> pending_;           // admitted, not yet renamed into place
  // Erased while the writer had them in hand: the writer drops them instead of landing them.
  std::unordered_set<CacheKey, CacheKeyHash> doomed_;
  // The last job (by Job::taken) whose admission the writer has decided. A job in hand past that
  // point is pending or settled, so an erase must not doom it: a doom nobody consumes would drop
  // the key's next write.
  uint64_t settled_ = 0;
  // Files forgotten from the index and not yet unlinked, per key (outside the lock, by whichever
  // thread forgot them). Only the writer forgets a pending key, so once the writer has waited for
  // its key's count to reach zero, no unlink of that key comes until its publish is done.
  std::unordered_map<CacheKey, uint32_t, CacheKeyHash> unlinking_;
  std::condition_variable unlinked_cv_;
  bool full_logged_ = false;
  LogLimiter write_error_log_;  // a dead disk fails every write: said once in a while
  std::chrono::steady_clock::time_point next_probe_{};

  std::mutex q_mu_;
  std::condition_variable q_cv_, idle_cv_;
  std::deque<Job> queue_;
  uint64_t queued_bytes_ = 0;
  bool busy_ = false;
  CacheKey writing_{};  // the job the writer took, while busy_
  uint64_t taken_ = 0;  // jobs the writer has taken; the one in hand is number taken_
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace prepfs

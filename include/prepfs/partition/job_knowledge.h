// What the training jobs told the daemon: each job's upcoming accesses (.prepfs/order, appended
// epoch by epoch) and per-sample importance (.prepfs/importance). It is the cache's
// SampleKnowledge (when each sample is next read, how important it is) and the prefetcher's list
// of what comes next.
//
// Each job's future is one sequence of (sample, form) accesses with absolute positions. A read
// of a sample (through any view) consumes its earliest pending access among the jobs (the one
// the job is closest to); a job's cursor is its first unconsumed position. Readers (DataLoader
// workers) run a little out of order; that only delays the cursor.
//
// next_use() puts every job on one timeline: an access k positions ahead of its job's cursor is
// k * (number of jobs) reads from now, assuming the jobs read at equal rates. For one job that is
// exact, and belady is Belady's MIN.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "prepfs/cache/sample_knowledge.h"
#include "prepfs/common/forms.h"

namespace prepfs {

struct Access {
  uint32_t node;
  Form form;  // the view the job reads it through
};

// One job's accesses ahead of its cursor, with their absolute positions.
struct JobAhead {
  struct Next {
    uint64_t pos;
    Access access;
    uint32_t earlier;  // this job's pending accesses of the same node and form before this one
  };
  std::string name;
  uint64_t cursor = 0;   // first unconsumed position
  // Grows whenever a read of the job's reaches the daemon (its cursor may not: a read the kernel's
  // page cache answered before leaves its position unconsumed), and when it publishes after it
  // has read since its last publish that counted (the next epoch after a pause). Not at every
  // publish: a job that only publishes, never reading, would never count as idle and would keep
  // the prefetch window.
  uint64_t activity = 0;
  std::vector<Next> ahead;
};

struct JobStatus {
  std::string name;
  uint64_t published = 0;  // accesses published so far
  uint64_t consumed = 0;   // of those, read
  uint64_t pending = 0;    // published, not read yet
};

// Each user's job names are their own: a job a user names NAME is known as NAME + this suffix,
// "@UID", except the daemon's own user's, known as NAME. Another user's `job NAME`, `reset` or
// `end` then never touches it (two users' unnamed orders used to be one job, "default").
std::string job_owner_suffix(uint32_t writer_uid, uint32_t daemon_uid);
// Whose job this is: its job_owner_suffix ("" for the daemon's own user's). No job name has '@'
// otherwise.
std::string_view job_owner(std::string_view job);

class JobKnowledge final : public SampleKnowledge {
 public:
  // Each job costs 16 bytes per node of the tree (20 MB for ImageNet's 1.28M files), and a job
  // that dies without `end` is never told apart from a quiet one. So at most this many are
  // known: a new job beyond it makes the daemon forget the one idle the longest (no publish
  // and no read of its samples) among the jobs of whoever holds the most, the new one counted
  // (see job_owner), with a warning.
  static constexpr size_t kMaxJobs = 16;

  explicit JobKnowledge(size_t nodes);
  ~JobKnowledge() override;

  // Appends to the job's future, creating the job. Past max_pending() accesses not read yet, the
  // oldest are dropped (logged): each costs 17 bytes, and nothing else bounds what a writer of
  // .prepfs/order makes the daemon hold.
  void publish(const std::string& job, const std::vector<Access>& accesses);
  // Four epochs of the whole tree, and at least 64Ki: a sampler publishes one epoch at a time.
  uint64_t max_pending() const { return 4 * uint64_t(nodes_) + 65536; }
  void reset(const std::string& job);  // drops the job's pending future (a resumed job republishes)
  // An opportunistic job reorders within a window to take cached samples first: its order says
  // which samples it still needs this epoch, not when. Each of them counts as needed now, so
  // among them belady keeps the most recently used (Seneca's setting: what one job fetched stays
  // while another still needs it).
  void set_opportunistic(const std::string& job, bool on);
  void end(const std::string& job);  // the job is done: it is forgotten
  // A sample was read. Returns true when a job expected it (one pending access consumed).
  bool note_access(uint32_t node);
  // Up to `max_per_job` pending accesses of every job that is not opportunistic, from its cursor
  // or from `from[job]` when that is further (what the prefetcher has already looked at).
  std::vector<JobAhead> upcoming(const std::map<std::string, uint64_t>& from, size_t max_per_job) const;
  // Of the job's positions, which it is past: read, behind its cursor (dropped by a reset, or read
  // unseen: see note_access), or all of them when the job is gone.
  std::vector<bool> passed(const std::string& job, const std::vector<uint64_t>& positions) const;
  // Moves whenever an access is published or consumed (the prefetcher polls it).
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }
  bool has_future() const override;

  void set_importance(uint32_t node, double value);  // non-negative; later values replace earlier
  void bump_generation();                            // after a batch of set_importance (policies re-rank once)

  uint64_t next_use(uint32_t node) const override;
  double importance(uint32_t node) const override;
  uint64_t generation() const override;

  std::vector<JobStatus> jobs() const;
  uint64_t unexpected_reads() const;  // reads no job had published

 private:
  struct Job;
  Job& job_locked(const std::string& name);
  void update_future_locked();
  uint64_t next_use_locked(uint32_t node) const;

  const size_t nodes_;
  mutable std::shared_mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::vector<float> importance_;  // NaN: never reported
  uint64_t clock_ = 0;             // reads noted so far
  uint64_t next_start_ = 0;        // a new job's first position: past every forgotten job's last
  uint64_t unexpected_ = 0;
  std::atomic<uint64_t> generation_{1};
  std::atomic<uint64_t> progress_{0};
  std::atomic<bool> future_{false};
};

}  // namespace prepfs

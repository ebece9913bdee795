#include "prepfs/partition/job_knowledge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <spdlog/spdlog.h>

#include "prepfs/common/log_limiter.h"

namespace prepfs {
namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
LogLimiter g_trim_log;
LogLimiter g_forget_log;  // any user may write .prepfs/order: one per job name would flood the log
// How far a sequence job reads past a position before its read of it counts as unseen: more than
// DataLoader workers read out of order (workers x prefetch_factor x batch: 8 x 2 x 256).
constexpr uint64_t kUnseenAfter = 4096;

}  // namespace

// One job's published future. Positions are absolute (they survive dropping the consumed
// prefix); index = position - base.
struct JobKnowledge::Job {
  std::string name;
  // Positions only grow, across a reset and across the jobs of one name (a job ended, or
  // forgotten, and published again): the prefetcher remembers, per name, the position it has
  // looked at, and a position that came back would be skipped as looked at already.
  uint64_t first = 0;  // the job's first position
  uint64_t base = 0;
  std::vector<Access> seq;
  std::vector<uint64_t> next_same;  // position of the next access of the same node, or kNone
  std::vector<bool> consumed;
  uint64_t cursor = 0;  // first unconsumed position
  bool opportunistic = false;
  uint64_t active = 0;  // the read clock at its last publish or read: the idlest goes first
  // An opportunistic job needs every pending sample now; "now" is when it published (reset) what
  // it needs, so that all of one epoch's needs rank alike and recency orders them.
  uint64_t needed_since = 0;
  uint64_t consumed_count = 0;
  // What JobAhead::activity reports: each read of the job's that reaches the daemon, and a
  // publish after the job has read since its last such publish (the next epoch's order, after a
  // pause longer than prefetch_idle: validation), never one by a job that does not read.
  uint64_t activity = 0;
  uint64_t consumed_at_publish = 0;
  // Published and not consumed (nor dropped): kept as it changes, since stats and metrics ask
  // for it on every render (a stat of .prepfs/stats renders it), and counting it walked up to
  // four epochs per job under the lock every read waits for.
  uint64_t pending = 0;
  uint64_t read_to = 0;  // one past the furthest position read
  std::vector<uint64_t> head;  // per node: its first pending position, or kNone
  std::vector<uint64_t> last;  // per node: its last published position, or kNone

  Job(std::string n, size_t nodes, uint64_t start)
      : name(std::move(n)), first(start), base(start), cursor(start), head(nodes, kNone), last(nodes, kNone) {}
  uint64_t end() const { return base + seq.size(); }

  void append(const Access& a) {
    const uint64_t pos = end();
    seq.push_back(a);
    next_same.push_back(kNone);
    consumed.push_back(false);
    pending++;
    if (last[a.node] != kNone && last[a.node] >= base && head[a.node] != kNone) next_same[last[a.node] - base] = pos;
    if (head[a.node] == kNone) head[a.node] = pos;
    last[a.node] = pos;
  }

  // The first pending access goes unread (it is its node's first pending one: every earlier
  // position is consumed).
  void drop_oldest() {
    consume(seq[cursor - base].node);
    consumed_count--;
  }

  void consume(uint32_t node) {
    const uint64_t pos = head[node];
    consumed[pos - base] = true;
    consumed_count++;
    pending--;
    read_to = std::max(read_to, pos + 1);
    head[node] = next_same[pos - base];
    if (head[node] == kNone) last[node] = kNone;
    while (cursor < end() && consumed[cursor - base]) cursor++;
    // Drop the consumed prefix once it is most of the sequence: memory follows the future.
    if (cursor - base > 4096 && cursor - base > seq.size() / 2) {
      const size_t k = cursor - base;
      seq.erase(seq.begin(), seq.begin() + static_cast<std::ptrdiff_t>(k));
      next_same.erase(next_same.begin(), next_same.begin() + static_cast<std::ptrdiff_t>(k));
      consumed.erase(consumed.begin(), consumed.begin() + static_cast<std::ptrdiff_t>(k));
      base = cursor;
    }
  }

  void clear_pending() {
    const uint64_t e = end();  // the next epoch's first position: after every one handed out
    for (uint64_t p = cursor; p < e; p++) {
      if (consumed[p - base]) continue;
      head[seq[p - base].node] = kNone;
      last[seq[p - base].node] = kNone;
    }
    seq.clear();
    next_same.clear();
    consumed.clear();
    pending = 0;
    base = cursor = e;
  }
};

JobKnowledge::JobKnowledge(size_t nodes) : nodes_(nodes), importance_(nodes, std::numeric_limits<float>::quiet_NaN()) {}

JobKnowledge::~JobKnowledge() = default;

std::string job_owner_suffix(uint32_t writer_uid, uint32_t daemon_uid) {
  return writer_uid == daemon_uid ? std::string() : "@" + std::to_string(writer_uid);
}

std::string_view job_owner(std::string_view job) {
  const size_t at = job.find('@');
  return at == std::string_view::npos ? std::string_view() : job.substr(at);
}

JobKnowledge::Job& JobKnowledge::job_locked(const std::string& name) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) {
    if (jobs_.size() >= kMaxJobs) {
      // The idlest job of whoever holds the most jobs, the new one counted: a user who makes many
      // jobs pushes out their own, not another user's few.
      std::map<std::string_view, size_t> held{{job_owner(name), 1}};
      for (const auto& [n, j] : jobs_) held[job_owner(n)]++;
      size_t most = 0;
      for (const auto& [owner, n] : held) most = std::max(most, n);
      auto idlest = jobs_.end();
      for (auto j = jobs_.begin(); j != jobs_.end(); ++j)
        if (held[job_owner(j->first)] == most && (idlest == jobs_.end() || j->second->active < idlest->second->active))
          idlest = j;
      if (g_forget_log.allow())
        spdlog::warn("order: {} jobs known, the most kept; forgetting job {} (idle for {} reads) for job {}",
                     jobs_.size(), idlest->first, clock_ - idlest->second->active, name);
      next_start_ = std::max(next_start_, idlest->second->end());
      jobs_.erase(idlest);
      update_future_locked();
    }
    it = jobs_.emplace(name, std::make_unique<Job>(name, nodes_, next_start_)).first;
    it->second->needed_since = clock_;
  }
  it->second->active = clock_;
  return *it->second;
}

void JobKnowledge::publish(const std::string& name, const std::vector<Access>& accesses) {
  {
    std::unique_lock lock(mu_);
    Job& j = job_locked(name);
    for (const Access& a : accesses)
      if (a.node < nodes_) j.append(a);
    // The oldest go past the bound: a job that appends epochs without a reset, or whose reads the
    // kernel's page cache answers (never seen here), would otherwise grow for ever.
    uint64_t dropped = 0;
    for (; j.end() - j.cursor > max_pending(); dropped++) j.drop_oldest();
    if (j.consumed_count != j.consumed_at_publish) {
      j.activity++;
      j.consumed_at_publish = j.consumed_count;
    }
    if (dropped > 0 && g_trim_log.allow())
      spdlog::warn("order: job '{}' had more than {} accesses not read yet (four epochs of this source); its "
                   "{} oldest are dropped. Write 'reset' before each epoch's order",
                   name, max_pending(), dropped);
    update_future_locked();
  }
  generation_.fetch_add(1);
  progress_.fetch_add(1);
}

void JobKnowledge::set_opportunistic(const std::string& name, bool on) {
  {
    std::unique_lock lock(mu_);
    job_locked(name).opportunistic = on;
  }
  generation_.fetch_add(1);
}

void JobKnowledge::reset(const std::string& name) {
  {
    std::unique_lock lock(mu_);
    auto it = jobs_.find(name);
    if (it == jobs_.end()) return;
    it->second->clear_pending();
    it->second->needed_since = clock_;
    update_future_locked();
  }
  generation_.fetch_add(1);
}

void JobKnowledge::end(const std::string& name) {
  {
    std::unique_lock lock(mu_);
    if (auto it = jobs_.find(name); it != jobs_.end()) {
      next_start_ = std::max(next_start_, it->second->end());
      jobs_.erase(it);
    }
    update_future_locked();
  }
  generation_.fetch_add(1);
}

bool JobKnowledge::note_access(uint32_t node) {
  std::unique_lock lock(mu_);
  clock_++;
  if (node >= nodes_) return false;
  // The job closest to this sample is the one reading it.
  Job* best = nullptr;
  uint64_t best_ahead = kNone;
  for (auto& [name, j] : jobs_) {
    const uint64_t h = j->head[node];
    if (h == kNone) continue;
    const uint64_t ahead = h - j->cursor;
    if (ahead < best_ahead) best = j.get(), best_ahead = ahead;
  }
  if (!best) {
    unexpected_++;
    return false;
  }
  best->consume(node);
  best->activity++;
  // A job that has read this far past a position never had its read of it seen: the kernel's
  // page cache answered it (a read of pages it holds never reaches the daemon). It counts as
  // done, so its sample does not rank as needed now for good and the job's pending accesses are
  // not held from that position until the next reset. Not for an opportunistic job: it reads
  // what it needs in any order.
  if (!best->opportunistic)
    while (best->read_to > best->cursor + kUnseenAfter) best->drop_oldest();  // (read_to < cursor after a reset)
  best->active = clock_;
  if (best->cursor == best->end()) update_future_locked();
  progress_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::vector<JobAhead> JobKnowledge::upcoming(const std::map<std::string, uint64_t>& from, size_t max_per_job) const {
  std::shared_lock lock(mu_);
  std::vector<JobAhead> out;
  for (const auto& [name, j] : jobs_) {
    // An opportunistic job's order is the set it still needs, not a sequence: fetching it ahead
    // would duplicate what another job is about to fetch for it.
    if (j->opportunistic) continue;
    JobAhead v{name, j->cursor, j->activity, {}};
    uint64_t p = j->cursor;
    if (auto f = from.find(name); f != from.end()) p = std::max(p, f->second);
    // Per (node, form) seen: its pending accesses before the next one. Only the same form's count
    // (augmented/ opens choose variants; a raw/ read of the file does not).
    std::map<std::pair<uint32_t, Form>, uint32_t> earlier;
    for (; p < j->end() && v.ahead.size() < max_per_job; p++) {
      if (j->consumed[p - j->base]) continue;
      const Access& a = j->seq[p - j->base];
      auto [it, first] = earlier.try_emplace({a.node, a.form}, 0);
      // A node's pending accesses are a chain from its head (consumed in that order): the first
      // one seen in this walk counts the same form's from the head.
      if (first)
        for (uint64_t q = j->head[a.node]; q != kNone && q < p; q = j->next_same[q - j->base])
          it->second += j->seq[q - j->base].form == a.form;
      v.ahead.push_back(JobAhead::Next{p, a, it->second++});
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<bool> JobKnowledge::passed(const std::string& name, const std::vector<uint64_t>& positions) const {
  std::shared_lock lock(mu_);
  std::vector<bool> out(positions.size(), true);
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return out;
  const Job& j = *it->second;
  for (size_t i = 0; i < positions.size(); i++) {
    const uint64_t p = positions[i];
    out[i] = p < j.cursor || (p < j.end() && j.consumed[p - j.base]);
  }
  return out;
}

bool JobKnowledge::has_future() const { return future_.load(std::memory_order_relaxed); }

void JobKnowledge::update_future_locked() {
  bool any = false;
  for (const auto& [name, j] : jobs_) any |= j->cursor < j->end();
  future_.store(any, std::memory_order_relaxed);
}

uint64_t JobKnowledge::next_use_locked(uint32_t node) const {
  if (node >= nodes_ || jobs_.empty()) return kNever;
  const uint64_t n = jobs_.size();
  uint64_t best = kNever;
  for (const auto& [name, j] : jobs_) {
    const uint64_t h = j->head[node];
    // Not clock_ for an opportunistic job's need: a policy keeps each entry's score until its sample
    // changes, so a sample fetched later would rank as needed later than one fetched before, and
    // be refused while the cache is full of older needs (the other jobs could then not share it).
    if (h != kNone) best = std::min(best, j->opportunistic ? j->needed_since : clock_ + (h - j->cursor) * n);
  }
  return best;
}

uint64_t JobKnowledge::next_use(uint32_t node) const {
  std::shared_lock lock(mu_);
  return next_use_locked(node);
}

void JobKnowledge::set_importance(uint32_t node, double value) {
  if (node >= nodes_ || !(value >= 0)) return;
  std::unique_lock lock(mu_);
  importance_[node] = static_cast<float>(value);
}

void JobKnowledge::bump_generation() { generation_.fetch_add(1); }

double JobKnowledge::importance(uint32_t node) const {
  std::shared_lock lock(mu_);
  if (node >= nodes_ || std::isnan(importance_[node])) return 1e30;  // unseen: most important
  return importance_[node];
}

uint64_t JobKnowledge::generation() const { return generation_.load(); }

std::vector<JobStatus> JobKnowledge::jobs() const {
  std::shared_lock lock(mu_);
  std::vector<JobStatus> out;
  for (const auto& [name, j] : jobs_) out.push_back(JobStatus{name, j->end() - j->first, j->consumed_count, j->pending});
  return out;
}

uint64_t JobKnowledge::unexpected_reads() const {
  std::shared_lock lock(mu_);
  return unexpected_;
}

}  // namespace prepfs

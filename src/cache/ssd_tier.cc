#include "prepfs/cache/ssd_tier.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"
#include "prepfs/io/uring.h"

namespace prepfs {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t entry_size(const Chunk& c) { return c.size() + sizeof(SsdEntryHeader); }

}  // namespace

SsdTier::SsdTier(const std::string& dir, uint64_t budget, std::unique_ptr<EvictionPolicy> policy,
                 TierCounters& counters, SsdTierOptions opts, SampleResidency* residency)
    : opts_(std::move(opts)),
      dir_(dir),
      counters_(counters),
      configured_budget_(budget),
      planned_(budget, std::move(policy), residency),
      spare_(budget, make_policy("lru"), residency) {
  std::string probe;
  int fd = dir_.create_temp(CacheKey{}, &probe);
  if (fd < 0) throw_errno(errno, "ssd_dir " + dir + " is not writable");
  ::close(fd);
  dir_.discard_temp(probe);
  if (!opts_.free_bytes) opts_.free_bytes = [this] { return dir_.free_bytes(); };
  load_existing();
  writer_ = std::thread([this] { writer_loop(); });
}

SsdTier::~SsdTier() {
  if (!flush(opts_.drain_timeout)) {
    std::lock_guard lock(q_mu_);
    spdlog::warn("ssd tier: the disk did not take {} queued writes in {} ms; dropping them", queue_.size(),
                 opts_.drain_timeout.count());
    queue_.clear();
    queued_bytes_ = 0;
  }
  {
    std::lock_guard lock(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  writer_.join();
}

std::string SsdTier::path_of(const CacheKey& key, Form form, bool spare) const {
  return dir_.path_of(key, entry_name(key, form, spare));
}

void SsdTier::load_existing() {
  struct Found {
    EntryName name;
    uint64_t size;
    int64_t mtime;
  };
  std::vector<Found> found;
  Names junk;
  dir_.for_each_file([&](const std::string& file, const struct stat& st) {
    std::optional<EntryName> name = parse_entry_name(file);
    if (!name) return;
    if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < sizeof(SsdEntryHeader)) {
      to_unlink(name->key, file, &junk);  // a torn entry, or a symlink where an entry belongs
      return;
    }
    found.push_back(
        {*name, static_cast<uint64_t>(st.st_size), int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
  });
  // Planned entries first (spares only fill what they leave), each oldest first so an LRU policy
  // starts with a sensible order.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.name.spare != b.name.spare ? !a.name.spare : a.mtime < b.mtime;
  });
  Names gone;
  for (const Found& f : found) {
    const Job job{f.name.key, nullptr, f.name.form, f.name.spare, kNoSample};  // its sample is learnt on a hit
    const bool duplicate = names_.count(f.name.key) != 0;                      // a spare next to its planned entry
    if (duplicate || !(f.name.spare ? admit_spare(job, f.size, &gone) : admit_planned(job, f.size, &gone))) {
      to_unlink(f.name.key, entry_name(f.name.key, f.name.form, f.name.spare), &junk);
      continue;
    }
    names_[f.name.key] = Named{f.name, 0};
  }
  unlink_all(junk);
  unlink_all(gone);
  if (!found.empty())
    spdlog::info("ssd tier: {} entries ({} bytes) and {} spare copies ({} bytes) found in {}", planned_.entries(),
                 planned_.bytes(), spare_.entries(), spare_.bytes(), dir_.path());
}

void SsdTier::collect(const std::vector<CacheKey>& evicted, Names* gone) {
  for (const CacheKey& k : evicted) {
    auto it = names_.find(k);
    if (it == names_.end()) continue;
    to_unlink(k, entry_name(k, it->second.name.form, it->second.name.spare), gone);
    names_.erase(it);
  }
  bump(counters_.evictions, evicted.size());
}

bool SsdTier::admit_planned(const Job& job, uint64_t size, Names* gone) {
  std::vector<CacheKey> evicted;
  const bool admitted = planned_.admit(job.key, size, job.form, &evicted, job.sample);
  collect(evicted, gone);  // admitted or not: a refusal may follow evictions
  if (!admitted) return false;
  evicted.clear();
  // Spare copies give way to planned entries.
  spare_.set_budget(planned_.budget() - std::min(planned_.budget(), planned_.bytes()), &evicted);
  collect(evicted, gone);
  return true;
}

bool SsdTier::admit_spare(const Job& job, uint64_t size, Names* gone) {
  std::vector<CacheKey> evicted;
  spare_.set_budget(planned_.budget() - std::min(planned_.budget(), planned_.bytes()), &evicted);
  const bool admitted = spare_.admit(job.key, size, job.form, &evicted, job.sample);  // older spares only
  collect(evicted, gone);
  return admitted;
}

void SsdTier::forget(const CacheKey& key, Names* gone) {
  planned_.remove(key);
  spare_.remove(key);
  auto it = names_.find(key);
  if (it == names_.end()) return;
  to_unlink(key, entry_name(key, it->second.name.form, it->second.name.spare), gone);
  names_.erase(it);
}

void SsdTier::to_unlink(const CacheKey& key, std::string file, Names* gone) {
  unlinking_[key]++;
  gone->emplace_back(key, std::move(file));
}

void SsdTier::set_budget(uint64_t budget, Names* gone) {
  std::vector<CacheKey> evicted;
  // The quotas first: lowered, they never add up to more than the budget (which would leave the
  // budget's evictions no form above its quota to take from).
  if (shares_) planned_.set_form_quotas(TierIndex::quotas_of(budget, *shares_));
  planned_.set_budget(budget, &evicted);
  spare_.set_budget(budget - std::min(budget, planned_.bytes()), &evicted);
  collect(evicted, gone);
}

void SsdTier::unlink_all(const Names& names) {
  for (const auto& [key, name] : names) {
    if (opts_.before_unlink) opts_.before_unlink(key);
    dir_.unlink_entry(key, name);
    // Counted down file by file, not once the batch is done: a writer waiting for this key
    // waits for its own file, not for a whole evict's worth of unlinks.
    bool last = false;
    {
      std::lock_guard lock(mu_);
      auto it = unlinking_.find(key);
      if (it != unlinking_.end() && --it->second == 0) {
        unlinking_.erase(it);
        last = true;
      }
    }
    if (last) unlinked_cv_.notify_all();
  }
}

void SsdTier::wait_for_unlinks(const CacheKey& key) {
  // Bounded by the unlinks of this key's files already under way (one or two syscalls, each
  // counted down as soon as it is done): a pending key gets no new ones.
  std::unique_lock lock(mu_);
  if (unlinking_.count(key) == 0) return;
  if (opts_.waits_for_unlink) {
    lock.unlock();
    opts_.waits_for_unlink(key);
    lock.lock();
  }
  unlinked_cv_.wait(lock, [&] { return unlinking_.count(key) == 0; });
}

ChunkRef SsdTier::get(const CacheKey& key, uint32_t sample) {
  EntryName name;
  uint64_t write = 0, indexed_size = 0;
  {
    std::lock_guard lock(mu_);
    auto it = names_.find(key);
    if (it == names_.end() || pending_.count(key)) {
      bump(counters_.misses);
      return nullptr;
    }
    name = it->second.name;
    write = it->second.write;
    indexed_size = (name.spare ? spare_ : planned_).size_of(key);
    (name.spare ? spare_ : planned_).touch(key);
    (name.spare ? spare_ : planned_).adopt(key, sample);
  }
  const std::string file = entry_name(key, name.form, name.spare);
  // Drops the entry this read found, not one the key got since (an erase, then a new write of
  // the same name, may come between the lookup and the open: that write owns the name now).
  auto drop = [&] {
    if (opts_.before_drop) opts_.before_drop(key);
    Names gone;
    {
      std::lock_guard lock(mu_);
      auto it = names_.find(key);
      if (it != names_.end() && it->second.write == write) forget(key, &gone);
    }
    unlink_all(gone);
  };
  auto corrupt = [&](const std::string& why) -> ChunkRef {
    spdlog::warn("ssd tier: entry {} is corrupt ({}); dropping it, it will be refetched", dir_.path_of(key, file), why);
    bump(counters_.corrupt);
    bump(counters_.misses);
    drop();
    return nullptr;
  };
  const uint64_t t0 = steady_ns();
  int fd = dir_.open_entry(key, file);
  if (fd < 0) {
    // Out of descriptors or memory: the entry is fine, only this read misses it.
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == EINTR) {
      bump(counters_.misses);
      return nullptr;
    }
    // ENOENT: evicted between the index check and the open, or removed from outside. Still indexed
    // with no file, put_async would count it as present forever: drop it. Anything else (a
    // symlink, a FIFO) is not ours to serve.
    if (errno != ENOENT) return corrupt(std::string("not a regular file: ") + std::strerror(errno));
    bump(counters_.misses);
    drop();
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof(SsdEntryHeader)) {
    ::close(fd);
    return corrupt("short file");
  }
  // The size it was indexed with: a file grown or replaced from outside is not read (nor is its
  // size allocated) before its checks would refuse it.
  if (static_cast<uint64_t>(st.st_size) != indexed_size) {
    ::close(fd);
    return corrupt("its size is not the indexed one");
  }
  // The header before the payload's allocation: an entry whose size was inflated before this
  // mount indexed it (truncate -s, file-system damage) would otherwise cost its whole size in
  // memory on every read, fail with ENOMEM, and never be dropped.
  SsdEntryHeader h;
  const size_t payload = static_cast<size_t>(st.st_size) - sizeof(SsdEntryHeader);
  auto fail = [&](const char* why) {
    ::close(fd);
    return corrupt(why);
  };
  // Then the payload alone, after the header: each byte is read once.
  ChunkRef chunk;
  size_t n = 0;
  try {
    if (io::pread_full(fd, &h, sizeof h, 0) != sizeof h) return fail("short read");
    const char* bad_header = check_entry_header(key, h);
    if (!bad_header && h.length != payload) bad_header = "length mismatch";
    if (bad_header) return fail(bad_header);
    auto made = Chunk::allocate(payload, sizeof(SsdEntryHeader));
    std::memcpy(made->raw(), &h, sizeof h);  // the header room holds what the file held
    n = sizeof h + io::pread_full(fd, made->mutable_data(), payload, sizeof h);
    chunk = std::move(made);
  } catch (const Error& e) {
    return fail(e.what());
  }
  ::close(fd);
  const uint64_t io_ns = steady_ns() - t0;  // the device's part; the checks below are CPU
  if (n != static_cast<size_t>(st.st_size)) return corrupt("short read");
  if (const char* why = check_entry(key, h, chunk->data(), payload)) return corrupt(why);
  bump(counters_.hits);
  bump(counters_.hit_bytes, payload);
  bump(counters_.read_bytes, n);
  bump(counters_.read_ns, io_ns);
  return chunk;
}

bool SsdTier::enqueue(Job job, uint64_t queue_limit) {
  {
    std::lock_guard lock(q_mu_);
    if (queued_bytes_ + job.chunk->size() > queue_limit || queue_.size() >= opts_.max_pending_jobs) {
      bump(counters_.rejected);
      return false;
    }
    queued_bytes_ += job.chunk->size();
    queue_.push_back(std::move(job));
  }
  q_cv_.notify_one();
  return true;
}

void SsdTier::sample_changed(uint32_t sample) {
  std::lock_guard lock(mu_);
  planned_.sample_changed(sample);
}

bool SsdTier::put_async(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample) {
  {
    std::lock_guard lock(mu_);
    // Indexed already, unless doomed: a write under way that an erase dooms is still indexed, and
    // this write (a fill after the erase) must not go with it.
    if (planned_.contains(key) && !doomed_.count(key)) return true;
  }
  return enqueue(Job{key, std::move(chunk), form, false, sample}, opts_.max_pending_bytes);
}

bool SsdTier::put_spare_async(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample) {
  {
    std::lock_guard lock(mu_);
    if (names_.count(key) && !doomed_.count(key)) return true;  // as in put_async
    // Room left by planned entries only; spares never displace them.
    if (planned_.bytes() + entry_size(*chunk) > planned_.budget()) return false;
  }
  return enqueue(Job{key, std::move(chunk), form, true, sample}, opts_.max_pending_bytes / 2);
}

bool SsdTier::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(q_mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !busy_; });
}

void SsdTier::writer_loop() {
  std::unique_lock lock(q_mu_);
  for (;;) {
    q_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (stop_) return;
      continue;
    }
    Job job = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= job.chunk->size();
    busy_ = true;
    writing_ = job.key;
    job.taken = ++taken_;
    lock.unlock();
    if (opts_.job_taken) opts_.job_taken(job.key);
    probe_room_if_due();
    write_entry(job);
    job.chunk.reset();  // freed outside the queue's lock
    if (opts_.job_done) opts_.job_done(job.key);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

// After the disk filled up: is there room again? (statvfs outside the lock.)
void SsdTier::probe_room_if_due() {
  {
    std::lock_guard lock(mu_);
    if (planned_.budget() >= configured_budget_ || Clock::now() < next_probe_) return;
    next_probe_ = Clock::now() + opts_.reprobe_interval;
  }
  const uint64_t free = opts_.free_bytes();
  Names gone;  // none expected (the budget only grows), but every forgotten file is unlinked
  {
    std::lock_guard lock(mu_);
    const uint64_t used = planned_.bytes() + spare_.bytes();
    // Keep a tenth of the free space as margin: other users of the disk may be growing too.
    const uint64_t room = std::min(configured_budget_, used + free / 10 * 9);
    if (room <= planned_.budget()) return;
    spdlog::info("ssd tier: {} has room again; the ssd budget grows from {} to {} bytes", dir_.path(),
                 planned_.budget(), room);
    set_budget(room, &gone);
    full_logged_ = false;
  }
  unlink_all(gone);
}

void SsdTier::write_entry(const Job& job) {
  const uint64_t disk_size = entry_size(*job.chunk);
  Names gone;
  bool admitted = false;
  {
    std::lock_guard lock(mu_);
    settled_ = job.taken;  // from here on the job is pending (admitted) or done with
    if (doomed_.erase(job.key)) return;
    auto it = names_.find(job.key);
    if (it != names_.end() && (job.spare || !it->second.name.spare)) return;  // already there
    // Space is reserved before the write so the files on disk never exceed the budget. A planned
    // entry replaces a spare copy of the same key (written anew: the spare goes).
    if (it != names_.end()) forget(job.key, &gone);
    admitted = job.spare ? admit_spare(job, disk_size, &gone) : admit_planned(job, disk_size, &gone);
    if (admitted) {
      pending_.insert(job.key);
      names_[job.key] = Named{EntryName{job.key, job.form, job.spare}, ++writes_};
    }
  }
  unlink_all(gone);
  if (!admitted) {
    bump(counters_.rejected);
    return;
  }

  const uint64_t t0 = steady_ns();
  const int err = write_file(job);
  const uint64_t io_ns = steady_ns() - t0;
  const std::string name = entry_name(job.key, job.form, job.spare);
  gone.clear();
  {
    std::lock_guard lock(mu_);
    pending_.erase(job.key);
    // Consumed whatever the outcome: a doom left behind by a failed write would drop the key's
    // next write.
    const bool doomed = doomed_.erase(job.key) > 0;
    if (err == 0 && doomed) {  // erased while being written: it must not stay
      forget(job.key, &gone);
    } else if (err == 0) {
      bump(counters_.inserts);
      bump(counters_.write_bytes, disk_size);
      bump(counters_.write_ns, io_ns);
      return;
    } else {
      planned_.remove(job.key);
      spare_.remove(job.key);
      names_.erase(job.key);
      bump(counters_.write_errors);
      if (err == ENOSPC || err == EDQUOT) {
        // The disk holds less than the budget promised: live within what it does hold, and look
        // again later (probe_room_if_due) in case room comes back.
        const uint64_t lowered = (planned_.bytes() + spare_.bytes()) / 10 * 9;
        if (!full_logged_)
          spdlog::warn("ssd tier: {} is full; lowering the ssd budget from {} to {} bytes (probed again every {} s)",
                       dir_.path(), planned_.budget(), lowered, opts_.reprobe_interval.count() / 1000);
        full_logged_ = true;
        set_budget(lowered, &gone);
        next_probe_ = Clock::now() + opts_.reprobe_interval;
      } else if (write_error_log_.allow()) {
        spdlog::warn("ssd tier: cannot write {}: {} ({} write errors so far; the entry is not cached on ssd)",
                     dir_.path_of(job.key, name), std::strerror(err), load(counters_.write_errors));
      }
    }
  }
  unlink_all(gone);
}

int SsdTier::write_file(const Job& job) {
  if (opts_.write_fault)
    if (int err = opts_.write_fault(job.key)) return err;
  const SsdEntryHeader h = make_entry_header(job.key, *job.chunk, job.form);
  std::string temp;
  int fd = dir_.create_temp(job.key, &temp);
  if (fd < 0) return errno;
  int err = 0;
  try {
    io::pwrite_full(fd, &h, sizeof h, 0);
    io::pwrite_full(fd, job.chunk->data(), job.chunk->size(), sizeof h);
  } catch (const Error& e) {
    err = e.err();
  }
  ::close(fd);
  if (err == 0) {
    wait_for_unlinks(job.key);
    err = dir_.publish(temp, job.key, entry_name(job.key, job.form, job.spare));
  }
  if (err != 0) dir_.discard_temp(temp);
  return err;
}

void SsdTier::set_form_shares(const std::array<double, kForms>& shares) {
  std::lock_guard lock(mu_);
  shares_ = shares;
  planned_.set_form_quotas(TierIndex::quotas_of(planned_.budget(), shares));
}

void SsdTier::erase(const CacheKey& key) {
  // A queued write of the key is dropped; one the writer has in hand is doomed (the writer drops
  // it); a landed entry is removed. A write that outlived its erase would hold its form's quota
  // for good (a form at its quota refuses, it does not age entries out).
  bool in_hand = false;
  uint64_t hand = 0;
  std::vector<ChunkRef> dropped;  // freed outside the locks
  {
    std::lock_guard lock(q_mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->key == key) {
        queued_bytes_ -= it->chunk->size();
        dropped.push_back(std::move(it->chunk));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    in_hand = busy_ && writing_ == key;
    hand = taken_;
    if (queue_.empty() && !busy_) idle_cv_.notify_all();
  }
  Names gone;
  {
    std::lock_guard lock(mu_);
    if (pending_.count(key)) {  // the writer forgets it when its write ends
      doomed_.insert(key);
      return;
    }
    // In hand but not yet settled: the writer has not looked at doomed_ for it yet. (Once settled,
    // an admitted job is pending and anything else is done with: a doom then would outlive its
    // job and drop the key's next write.) An entry already landed, say a spare copy the job would
    // replace, goes now.
    if (in_hand && hand > settled_) doomed_.insert(key);
    forget(key, &gone);
  }
  unlink_all(gone);
}

void SsdTier::clear() {
  std::deque<Job> dropped;  // freed outside the locks
  bool in_hand = false;
  CacheKey writing;
  uint64_t hand = 0;
  {
    std::lock_guard lock(q_mu_);
    dropped.swap(queue_);
    queued_bytes_ = 0;
    in_hand = busy_;
    writing = writing_;
    hand = taken_;
    if (!busy_) idle_cv_.notify_all();
  }
  Names gone;
  {
    std::lock_guard lock(mu_);
    if (in_hand && hand > settled_) doomed_.insert(writing);  // not settled yet (see erase)
    std::vector<CacheKey> keys;
    keys.reserve(names_.size());
    for (const auto& [k, n] : names_) keys.push_back(k);
    for (const CacheKey& k : keys) {
      if (pending_.count(k))
        doomed_.insert(k);
      else
        forget(k, &gone);
    }
  }
  unlink_all(gone);
}

uint64_t SsdTier::queued_bytes() {
  std::lock_guard lock(q_mu_);
  return queued_bytes_;
}

size_t SsdTier::queued_jobs() {
  std::lock_guard lock(q_mu_);
  return queue_.size();
}

bool SsdTier::contains(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  return planned_.contains(key);
}

bool SsdTier::contains_spare(const CacheKey& key) const {
  std::lock_guard lock(mu_);
  return spare_.contains(key);
}

TierStats SsdTier::stats() const {
  std::lock_guard lock(mu_);
  return planned_.stats();
}

SpareStats SsdTier::spare_stats() const {
  std::lock_guard lock(mu_);
  return SpareStats{spare_.bytes(), spare_.entries()};
}

}  // namespace prepfs

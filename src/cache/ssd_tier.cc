#include "prepfs/cache/ssd_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/io/uring.h"

namespace prepfs {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'E', 'P', 'F', 'S', 'C', '\0'};
const char kFormSuffix[kForms] = {'r', 'd', 'a'};

uint64_t header_checksum(const SsdEntryHeader& h) { return XXH3_64bits(&h, offsetof(SsdEntryHeader, header_checksum)); }

std::atomic<uint64_t> g_tmp_seq{0};

}  // namespace

SsdTier::SsdTier(const std::string& dir, uint64_t budget, std::unique_ptr<EvictionPolicy> policy,
                 TierCounters& counters, SampleResidency* residency)
    : dir_(dir), counters_(counters), index_(budget, std::move(policy), residency) {
  mkdir_p(dir_ + "/chunks");
  mkdir_p(dir_ + "/tmp");
  // Leftovers of a crash mid-write: never renamed into place, so never valid entries.
  if (DIR* d = opendir((dir_ + "/tmp").c_str())) {
    while (dirent* de = readdir(d))
      if (de->d_name[0] != '.') unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
  }
  std::string probe = dir_ + "/tmp/.probe";
  int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno(errno, "ssd_dir " + dir_ + " is not writable");
  ::close(fd);
  ::unlink(probe.c_str());
  load_existing();
  writer_ = std::thread([this] { writer_loop(); });
}

SsdTier::~SsdTier() {
  {
    std::lock_guard lock(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  writer_.join();
}

std::string SsdTier::path_of(const CacheKey& key, Form form) const {
  std::string hex = key.hex();
  return dir_ + "/chunks/" + hex.substr(0, 2) + "/" + hex + "-" + kFormSuffix[static_cast<int>(form)];
}

std::string SsdTier::find_path(const CacheKey& key) const {
  auto it = forms_.find(key);
  return path_of(key, it == forms_.end() ? Form::raw : it->second);
}

void SsdTier::load_existing() {
  struct Found {
    CacheKey key;
    Form form;
    uint64_t size;
    int64_t mtime;
  };
  std::vector<Found> found;
  std::string chunks = dir_ + "/chunks";
  DIR* top = opendir(chunks.c_str());
  if (!top) throw_errno(errno, "opendir " + chunks);
  while (dirent* sub = readdir(top)) {
    if (sub->d_name[0] == '.') continue;
    std::string subdir = chunks + "/" + sub->d_name;
    DIR* d = opendir(subdir.c_str());
    if (!d) continue;
    while (dirent* de = readdir(d)) {
      std::string name = de->d_name;
      CacheKey key;
      if (name.size() != 34 || name[32] != '-' || !CacheKey::from_hex(name.substr(0, 32), &key)) continue;
      const char* suffix = std::find(kFormSuffix, kFormSuffix + kForms, name[33]);
      struct stat st;
      if (suffix == kFormSuffix + kForms || fstatat(dirfd(d), de->d_name, &st, 0) != 0) continue;
      if (static_cast<uint64_t>(st.st_size) < sizeof(SsdEntryHeader)) {
        unlinkat(dirfd(d), de->d_name, 0);
        continue;
      }
      found.push_back({key, static_cast<Form>(suffix - kFormSuffix), static_cast<uint64_t>(st.st_size),
                       int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
    }
    closedir(d);
  }
  closedir(top);
  // Oldest first, so an LRU policy starts with a sensible order.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::vector<CacheKey> evicted;
  for (const Found& f : found) {
    forms_[f.key] = f.form;
    if (!index_.admit(f.key, f.size, f.form, &evicted)) {
      ::unlink(path_of(f.key, f.form).c_str());
      forms_.erase(f.key);
    }
  }
  unlink_keys(evicted);
  if (!found.empty())
    spdlog::info("ssd tier: {} entries ({} bytes) found in {}", index_.entries(), index_.bytes(), dir_);
}

// Callers hold mu_ only around index changes; the unlinks happen outside it.
void SsdTier::unlink_keys(const std::vector<CacheKey>& keys) {
  std::vector<std::string> paths;
  {
    std::lock_guard lock(mu_);
    for (const CacheKey& k : keys) {
      paths.push_back(find_path(k));
      forms_.erase(k);
    }
  }
  for (const std::string& p : paths) ::unlink(p.c_str());
  bump(counters_.evictions, keys.size());
}

ChunkRef SsdTier::get(const CacheKey& key, uint32_t sample) {
  std::string path;
  {
    std::lock_guard lock(mu_);
    if (!index_.contains(key) || pending_.count(key)) {
      bump(counters_.misses);
      return nullptr;
    }
    index_.touch(key);
    index_.adopt(key, sample);
    path = find_path(key);
  }
  auto corrupt = [&](const char* why) -> ChunkRef {
    spdlog::warn("ssd tier: entry {} is corrupt ({}); dropping it, it will be refetched", path, why);
    bump(counters_.corrupt);
    bump(counters_.misses);
    {
      std::lock_guard lock(mu_);
      index_.remove(key);
      forms_.erase(key);
    }
    ::unlink(path.c_str());
    return nullptr;
  };
  uint64_t t0 = steady_ns();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {  // evicted between the index check and the open, or removed from outside: a miss
    bump(counters_.misses);
    if (errno == ENOENT) {
      // Still indexed with no file: drop it, or put_async would count it as present forever. (A
      // rewrite of the key racing this open loses its entry too: one more miss, never wrong bytes.)
      bool dropped = false;
      {
        std::lock_guard lock(mu_);
        dropped = !pending_.count(key) && index_.remove(key);
        if (dropped) forms_.erase(key);
      }
      if (dropped) ::unlink(path.c_str());
    }
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof(SsdEntryHeader)) {
    ::close(fd);
    return corrupt("short file");
  }
  size_t payload = static_cast<size_t>(st.st_size) - sizeof(SsdEntryHeader);
  auto chunk = Chunk::allocate(payload, sizeof(SsdEntryHeader));
  size_t n;
  try {
    n = io::pread_full(fd, chunk->raw(), static_cast<size_t>(st.st_size), 0);
  } catch (const Error& e) {
    ::close(fd);
    return corrupt(e.what());
  }
  ::close(fd);
  uint64_t io_ns = steady_ns() - t0;  // the device's part; the checks below are CPU
  if (n != static_cast<size_t>(st.st_size)) return corrupt("short read");
  SsdEntryHeader h;
  std::memcpy(&h, chunk->raw(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return corrupt("bad magic");
  if (h.version != kFormatVersion || h.header_size != sizeof h) return corrupt("unknown format version");
  if (h.header_checksum != header_checksum(h)) return corrupt("header checksum mismatch");
  if (h.key_hi != key.hi || h.key_lo != key.lo) return corrupt("key mismatch");
  if (h.length != payload) return corrupt("length mismatch");
  if (XXH3_64bits_withSeed(chunk->data(), payload, key.lo) != h.checksum) return corrupt("checksum mismatch");
  bump(counters_.hits);
  bump(counters_.hit_bytes, payload);
  bump(counters_.read_bytes, n);
  bump(counters_.read_ns, io_ns);
  return chunk;
}

bool SsdTier::put_async(const CacheKey& key, ChunkRef chunk, Form form, uint32_t sample) {
  {
    std::lock_guard lock(mu_);
    if (index_.contains(key)) return true;
  }
  {
    std::lock_guard lock(q_mu_);
    if (queued_bytes_ + chunk->size() > kMaxPendingBytes) {
      bump(counters_.rejected);
      return false;
    }
    queued_bytes_ += chunk->size();
    queue_.push_back(Job{key, std::move(chunk), form, sample});
  }
  q_cv_.notify_one();
  return true;
}

void SsdTier::flush() {
  std::unique_lock lock(q_mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
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
    busy_ = true;
    writing_ = job.key;
    lock.unlock();
    write_entry(job);
    lock.lock();
    queued_bytes_ -= job.chunk->size();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void SsdTier::write_entry(const Job& job) {
  uint64_t disk_size = job.chunk->size() + sizeof(SsdEntryHeader);
  std::vector<CacheKey> evicted;
  {
    std::lock_guard lock(mu_);
    if (doomed_.erase(job.key) || index_.contains(job.key)) return;
    // Space is reserved before the write so the files on disk never exceed the budget.
    if (!index_.admit(job.key, disk_size, job.form, &evicted, job.sample)) {
      bump(counters_.rejected);
      return;
    }
    pending_.insert(job.key);
    forms_[job.key] = job.form;
  }
  unlink_keys(evicted);

  SsdEntryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kFormatVersion;
  h.header_size = sizeof h;
  h.key_hi = job.key.hi;
  h.key_lo = job.key.lo;
  h.length = job.chunk->size();
  h.checksum = XXH3_64bits_withSeed(job.chunk->data(), job.chunk->size(), job.key.lo);
  h.form = static_cast<uint8_t>(job.form);
  h.header_checksum = header_checksum(h);

  std::string final_path = path_of(job.key, job.form);
  std::string tmp = dir_ + "/tmp/" + job.key.hex() + "." + std::to_string(g_tmp_seq++);
  int err = 0;
  uint64_t t0 = steady_ns();
  int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) err = errno;
  try {
    if (fd >= 0) {
      io::pwrite_full(fd, &h, sizeof h, 0);
      io::pwrite_full(fd, job.chunk->data(), job.chunk->size(), sizeof h);
    }
  } catch (const Error& e) {
    err = e.err();
  }
  if (fd >= 0) ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    if (errno == ENOENT) {  // first entry in this fan-out directory
      ::mkdir(final_path.substr(0, final_path.rfind('/')).c_str(), 0755);
      if (::rename(tmp.c_str(), final_path.c_str()) != 0) err = errno;
    } else {
      err = errno;
    }
  }
  uint64_t io_ns = steady_ns() - t0;
  std::unique_lock lock(mu_);
  pending_.erase(job.key);
  if (err == 0 && doomed_.erase(job.key)) {  // erased while being written: it must not stay
    index_.remove(job.key);
    forms_.erase(job.key);
    lock.unlock();
    ::unlink(final_path.c_str());
    return;
  }
  if (err == 0) {
    bump(counters_.inserts);
    bump(counters_.write_bytes, disk_size);
    bump(counters_.write_ns, io_ns);
    return;
  }
  ::unlink(tmp.c_str());
  index_.remove(job.key);
  forms_.erase(job.key);
  bump(counters_.write_errors);
  if (err == ENOSPC || err == EDQUOT) {
    // The disk holds less than the budget promised: live within what it does hold.
    std::vector<CacheKey> shed;
    uint64_t new_budget = index_.bytes() * 9 / 10;
    if (!full_logged_) {
      spdlog::warn("ssd tier: {} is full; lowering the ssd budget from {} to {} bytes", dir_, index_.budget(),
                   new_budget);
      full_logged_ = true;
    }
    index_.set_budget(new_budget, &shed);
    for (const CacheKey& k : shed) {
      ::unlink(find_path(k).c_str());
      forms_.erase(k);
    }
    bump(counters_.evictions, shed.size());
  } else {
    spdlog::warn("ssd tier: cannot write {}: {}", final_path, std::strerror(err));
  }
}

void SsdTier::sample_changed(uint32_t sample) {
  std::lock_guard lock(mu_);
  index_.sample_changed(sample);
}

void SsdTier::set_form_quotas(const std::array<uint64_t, kForms>& quotas) {
  std::lock_guard lock(mu_);
  index_.set_form_quotas(quotas);
}

void SsdTier::erase(const CacheKey& key) {
  // A queued write of the key is dropped; one the writer has in hand is doomed (the writer drops
  // it); a landed entry is removed. A write that outlived its erase would hold its form's quota
  // for good (a form at its quota refuses, it does not age entries out).
  bool in_hand = false;
  {
    std::lock_guard lock(q_mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->key == key) {
        queued_bytes_ -= it->chunk->size();
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    in_hand = busy_ && writing_ == key;
    if (queue_.empty() && !busy_) idle_cv_.notify_all();
  }
  {
    std::lock_guard lock(mu_);
    if (pending_.count(key) || (in_hand && !index_.contains(key))) {
      doomed_.insert(key);
      return;
    }
    if (!index_.remove(key)) return;
  }
  unlink_keys({key});
}

void SsdTier::clear() {
  flush();
  std::vector<CacheKey> keys;
  {
    std::lock_guard lock(mu_);
    keys = index_.keys();
    for (const CacheKey& k : keys) index_.remove(k);
  }
  unlink_keys(keys);
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
  return index_.contains(key);
}

TierStats SsdTier::stats() const {
  std::lock_guard lock(mu_);
  return index_.stats();
}

}  // namespace prepfs

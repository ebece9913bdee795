#include "prepfs/core/control_fs.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/common/log_limiter.h"
#include "prepfs/core/dir_listing.h"

namespace prepfs {
namespace {
LogLimiter g_bad_write_log;
LogLimiter g_snapshot_budget_log;
}  // namespace

ControlFs::ControlFs(std::vector<File> files, uint64_t snapshot_budget)
    : files_(std::move(files)), snapshot_budget_(snapshot_budget) {}

const ControlFs::File& ControlFs::file(uint64_t ino) const {
  if (ino < 2 || ino - 2 >= files_.size()) throw Error(ENOENT, "no such control file");
  return files_[ino - 2];
}

const ControlFs::File& ControlFs::writable(uint64_t ino) const {
  if (ino == 1) throw Error(EROFS, "the control directory is read-only");
  const File& f = file(ino);
  if (!f.write && !f.session) throw Error(EROFS, "control file " + f.name + " is read-only");
  return f;
}

uint32_t ControlFs::mode_of(const File& f) {
  // Writable command files belong to the daemon's owner, unless any job may write them; readable
  // files to anyone who can see them.
  const uint32_t write = !(f.write || f.session) ? 0 : f.anyone_writes ? 0222 : 0200;
  return S_IFREG | (f.render ? 0444 : 0) | write;
}

Attr ControlFs::getattr(uint64_t ino) {
  Attr a;
  a.ino = ino;
  a.mtime_ns = wall_clock_ns();
  a.timeout = 0;  // contents and sizes change all the time
  if (ino == 1) {
    a.mode = S_IFDIR | 0555;
    a.nlink = 2;
    return a;
  }
  const File& f = file(ino);
  a.mode = mode_of(f);
  a.size = f.sized ? contents(f).size() : 0;  // exact for a reader that stats, then opens at once
  return a;
}

Attr ControlFs::lookup(uint64_t parent, std::string_view name) {
  if (parent != 1) throw Error(ENOENT, "no such entry");
  for (size_t i = 0; i < files_.size(); i++)
    if (files_[i].name == name) return getattr(i + 2);
  throw Error(ENOENT, "no such entry");
}

void ControlFs::readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) {
  if (ino != 1) throw Error(ENOTDIR, "not a directory");
  Attr dir = getattr(1);
  list_dir(
      offset, dir, [&] { return dir; }, files_.size(),
      [&](uint64_t i) -> std::optional<DirEntry> {
        Attr a;
        a.ino = i + 2;
        a.mode = mode_of(files_[i]);
        return DirEntry{files_[i].name, a};
      },
      emit);
}

std::string ControlFs::readlink(uint64_t) { throw Error(EINVAL, "not a symlink"); }

OpenReply ControlFs::open(uint64_t ino, int flags) { return open(ino, flags, ::geteuid()); }

OpenReply ControlFs::open(uint64_t ino, int flags, uint32_t caller_uid) {
  const File& f = file(ino);
  if ((flags & O_ACCMODE) != O_RDONLY) writable(ino);  // EROFS for a read-only file
  // A handle opened for writing only reads nothing: no snapshot to render.
  std::shared_ptr<const std::string> snapshot = (flags & O_ACCMODE) == O_WRONLY
                                                    ? std::make_shared<const std::string>()
                                                    : this->snapshot(ino, contents(f), caller_uid);
  // Made before the handle, which must not outlive a session that failed to start.
  std::shared_ptr<WriteSession> session;
  if (f.session && (flags & O_ACCMODE) != O_RDONLY) session = f.session(caller_uid);
  OpenReply r;
  r.fh = open_.add(snapshot, snapshot->data(), snapshot->size());
  r.direct_io = true;
  if (session) {
    std::lock_guard lock(sessions_mu_);
    sessions_[r.fh] = std::move(session);
  }
  return r;
}

std::shared_ptr<const std::string> ControlFs::snapshot(uint64_t ino, std::string text, uint32_t uid) {
  // Shared only among the handles of the user who made it, who pays for it: another user's
  // handle on it would keep it charged to its maker, past the maker's own closes.
  const std::pair<uint64_t, uint32_t> slot{ino, uid};
  std::shared_ptr<const std::string> same;
  {
    std::lock_guard lock(snapshots_mu_);
    if (auto it = latest_.find(slot); it != latest_.end()) same = it->second.lock();
  }
  // Compared outside the lock: a `samples` is tens of MB, and a loader's workers open it at once.
  if (same && *same == text) return same;
  const uint64_t size = text.size();
  const uint64_t budget = std::max(snapshot_budget_, 2 * size);
  std::lock_guard lock(snapshots_mu_);
  auto found = held_by_uid_.find(uid);
  const uint64_t held = found == held_by_uid_.end() ? 0 : found->second->load(std::memory_order_relaxed);
  if (held + size > budget) {
    if (g_snapshot_budget_log.allow())
      spdlog::warn(
          "control file {}: open by uid {} refused (ENOMEM): that user's open handles of .prepfs/ files hold {} bytes "
          "of snapshots, and this one adds {} (the budget is {} per user)",
          files_[ino - 2].name, uid, held, size, budget);
    throw Error(ENOMEM, "control file " + files_[ino - 2].name + ": the user's open handles hold their budget");
  }
  std::shared_ptr<std::atomic<uint64_t>>& mine = held_by_uid_[uid];
  if (!mine) mine = std::make_shared<std::atomic<uint64_t>>(0);
  mine->fetch_add(size, std::memory_order_relaxed);
  // The counter outlives this ControlFs if a reply still holds the snapshot.
  std::shared_ptr<const std::string> made(new std::string(std::move(text)),
                                          [user = mine, size](const std::string* p) {
                                            user->fetch_sub(size, std::memory_order_relaxed);
                                            delete p;
                                          });
  latest_[slot] = made;
  return made;
}

uint64_t ControlFs::snapshot_bytes() const {
  std::lock_guard lock(snapshots_mu_);
  uint64_t total = 0;
  for (const auto& [uid, held] : held_by_uid_) total += held->load(std::memory_order_relaxed);
  return total;
}

std::vector<Slice> ControlFs::read(uint64_t, uint64_t fh, uint64_t off, size_t size) {
  return open_.read(fh, off, size);
}

size_t ControlFs::write(uint64_t ino, uint64_t fh, uint64_t, std::string_view data) {
  const File& f = writable(ino);
  open_.check(fh);
  std::shared_ptr<WriteSession> session;
  if (f.session) {
    std::lock_guard lock(sessions_mu_);
    auto it = sessions_.find(fh);
    if (it == sessions_.end()) throw Error(EBADF, "control file " + f.name + " was not opened for writing");
    session = it->second;
  }
  try {
    if (session)
      session->write(data);
    else
      f.write(data);
  } catch (const Error& e) {
    // The writer sees only the errno (EINVAL): the reason goes to the log.
    if (g_bad_write_log.allow()) spdlog::warn("control file {}: {}", f.name, e.what());
    throw;
  }
  return data.size();
}

Attr ControlFs::truncate(uint64_t ino, uint64_t) {
  writable(ino);
  return getattr(ino);
}

void ControlFs::release(uint64_t, uint64_t fh) {
  open_.release(fh);
  std::shared_ptr<WriteSession> session;
  {
    std::lock_guard lock(sessions_mu_);
    auto it = sessions_.find(fh);
    if (it == sessions_.end()) return;
    session = std::move(it->second);
    sessions_.erase(it);
  }
  session->close();  // errors here have no writer left to see them: the session logs them
}

}  // namespace prepfs

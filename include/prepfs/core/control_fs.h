// The .prepfs/ control tree, served by its own FUSE session: its files change from one open to
// the next, which the main session (no OPEN, page cache kept) cannot express. Each open takes a
// snapshot that the handle reads consistently; reads bypass the page cache.
//
// A file with a `write` action is writable (a command channel such as `evict`): each write()
// hands its bytes to the action, whose Error becomes the writer's errno. Everything else in the
// tree stays read-only and answers EROFS, as the rest of the mount does.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prepfs/core/filesystem.h"
#include "prepfs/core/open_snapshots.h"

namespace prepfs {

class ControlFs final : public Filesystem {
 public:
  using Render = std::function<std::string()>;
  using Write = std::function<void(std::string_view data)>;
  // A command channel with state per open handle (a job's order stream): one session per open
  // for writing, fed every write in order, closed at release.
  class WriteSession {
   public:
    virtual ~WriteSession() = default;
    virtual void write(std::string_view data) = 0;  // Error -> the writer's errno
    virtual void close() = 0;                       // the handle is released (flush a last line)
  };
  // Given the uid of the user who opens (a job's names are that user's own).
  using OpenSession = std::function<std::unique_ptr<WriteSession>(uint32_t uid)>;
  struct File {
    std::string name;
    Render render;          // null: the file reads as empty
    Write write = nullptr;  // null: read-only (EROFS), unless `session` is set
    OpenSession session = nullptr;
    // Its size is shown (each stat renders it). Off for a file that is slow to render: it shows
    // size 0, as /proc files do, and its readers read to the end (the handles are direct_io).
    bool sized = true;
    // Writable by every user who can reach the mount (mode 0222), not only by the one who
    // mounted (0200): a job's own knowledge (its order, its losses). Jobs run as ordinary users
    // under a mount a service made as root with allow_other.
    bool anyone_writes = false;
  };
  // The bytes the read snapshots of one user's open handles may hold together before that user's
  // open that would add a new one fails with ENOMEM (any user may open these files, and keep the
  // handles open; one user's handles never refuse another's opens). An open that renders what the
  // newest snapshot the same user made of the file holds, while a handle holds it, shares that
  // copy, so a loader's workers opening `samples` hold one. At least twice the new
  // snapshot is allowed, so one open of a large file never fails for want of room alone.
  static constexpr uint64_t kDefaultSnapshotBudget = 256ull << 20;
  explicit ControlFs(std::vector<File> files, uint64_t snapshot_budget = kDefaultSnapshotBudget);

  Attr getattr(uint64_t ino) override;
  Attr lookup(uint64_t parent, std::string_view name) override;
  void readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) override;
  std::string readlink(uint64_t) override;
  OpenReply open(uint64_t ino, int flags) override;  // as the daemon's own user
  OpenReply open(uint64_t ino, int flags, uint32_t caller_uid) override;
  std::vector<Slice> read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) override;
  void release(uint64_t ino, uint64_t fh) override;
  FsStat statfs() override { return {}; }
  // Bytes the read snapshots of all open handles hold (each shared copy once).
  uint64_t snapshot_bytes() const;

  // The write path of the writable control files (called by the FUSE adaptor of this session).
  // Both throw Error(EROFS) for any other inode.
  size_t write(uint64_t ino, uint64_t fh, uint64_t off, std::string_view data) override;
  Attr truncate(uint64_t ino, uint64_t size) override;  // O_TRUNC / truncate(2): accepted, nothing to do

 private:
  const File& file(uint64_t ino) const;      // throws ENOENT
  const File& writable(uint64_t ino) const;  // throws ENOENT, or EROFS when it is read-only
  static uint32_t mode_of(const File& f);
  std::string contents(const File& f) const { return f.render ? f.render() : std::string(); }
  // The snapshot an open by `uid` reads: the newest that user made of the file, if a handle
  // holds it and it is the same, else a new one (ENOMEM past that user's budget).
  std::shared_ptr<const std::string> snapshot(uint64_t ino, std::string text, uint32_t uid);
  std::vector<File> files_;  // file i has inode i + 2; the directory is inode 1
  const uint64_t snapshot_budget_;
  mutable std::mutex snapshots_mu_;
  // By file and user: the newest snapshot that user made of it, while a handle holds it.
  std::map<std::pair<uint64_t, uint32_t>, std::weak_ptr<const std::string>> latest_;
  // What each user's snapshots hold, shared with the snapshots' deleters: a reply may hold one
  // past its handle's release.
  std::unordered_map<uint32_t, std::shared_ptr<std::atomic<uint64_t>>> held_by_uid_;
  std::mutex sessions_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<WriteSession>> sessions_;  // by handle
  OpenSnapshots open_;
};

}  // namespace prepfs

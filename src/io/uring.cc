#include "prepfs/io/uring.h"

#include <liburing.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "prepfs/common/error.h"

namespace prepfs::io {
namespace {

constexpr unsigned kQueueDepth = 16;
constexpr size_t kSegment = 512 * 1024;  // large enough for sequential speed, small enough to overlap

std::atomic<bool> g_fallback_logged{false};

class Ring {
 public:
  Ring() {
    int rc = io_uring_queue_init(kQueueDepth, &ring_, 0);
    ok_ = rc == 0;
    if (!ok_ && !g_fallback_logged.exchange(true))
      spdlog::warn("io_uring unavailable ({}); falling back to pread/pwrite", std::strerror(-rc));
  }
  ~Ring() {
    if (ok_) io_uring_queue_exit(&ring_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  bool ok() const { return ok_; }

  // Submits up to kQueueDepth segments of [buf, buf+len) at off; returns per-segment results
  // (bytes or -errno) in order.
  std::vector<int> transfer(bool write, int fd, char* buf, size_t len, uint64_t off) {
    size_t nseg = (len + kSegment - 1) / kSegment;
    std::vector<int> res(nseg, 0);
    size_t submitted = 0, completed = 0;
    while (completed < nseg) {
      while (submitted < nseg && submitted - completed < kQueueDepth) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (!sqe) break;
        size_t seg_off = submitted * kSegment;
        unsigned n = static_cast<unsigned>(std::min(kSegment, len - seg_off));
        if (write)
          io_uring_prep_write(sqe, fd, buf + seg_off, n, off + seg_off);
        else
          io_uring_prep_read(sqe, fd, buf + seg_off, n, off + seg_off);
        io_uring_sqe_set_data64(sqe, submitted);
        submitted++;
      }
      int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR) throw_errno(-rc, "io_uring_submit");
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        res[io_uring_cqe_get_data64(cqe)] = cqe->res;
        seen++;
      }
      io_uring_cq_advance(&ring_, seen);
      completed += seen;
    }
    return res;
  }

 private:
  io_uring ring_{};
  bool ok_ = false;
};

Ring& thread_ring() {
  thread_local Ring ring;
  return ring;
}

// Finishes a segment that came back short, with plain syscalls (rare: signals, EOF races).
size_t finish_read(int fd, char* buf, size_t len, uint64_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(errno, "read");
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void finish_write(int fd, const char* buf, size_t len, uint64_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pwrite(fd, buf + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(errno, "write");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

bool uring_active() { return thread_ring().ok(); }

size_t pread_full(int fd, void* buf, size_t len, uint64_t off) {
  char* p = static_cast<char*>(buf);
  Ring& ring = thread_ring();
  if (!ring.ok() || len == 0) return finish_read(fd, p, len, off);
  std::vector<int> res = ring.transfer(false, fd, p, len, off);
  size_t total = 0;
  for (size_t i = 0; i < res.size(); i++) {
    size_t seg_off = i * kSegment, want = std::min(kSegment, len - seg_off);
    if (res[i] < 0) throw_errno(-res[i], "read");
    size_t got = static_cast<size_t>(res[i]);
    if (got < want) got += finish_read(fd, p + seg_off + got, want - got, off + seg_off + got);
    total += got;
    if (got < want) break;  // end of file: later segments read nothing valid
  }
  return total;
}

void pwrite_full(int fd, const void* buf, size_t len, uint64_t off) {
  const char* p = static_cast<const char*>(buf);
  Ring& ring = thread_ring();
  if (!ring.ok() || len == 0) return finish_write(fd, p, len, off);
  std::vector<int> res = ring.transfer(true, fd, const_cast<char*>(p), len, off);
  for (size_t i = 0; i < res.size(); i++) {
    size_t seg_off = i * kSegment, want = std::min(kSegment, len - seg_off);
    if (res[i] < 0) throw_errno(-res[i], "write");
    size_t got = static_cast<size_t>(res[i]);
    if (got < want) finish_write(fd, p + seg_off + got, want - got, off + seg_off + got);
  }
}

}  // namespace prepfs::io

#include "prepfs/io/uring.h"

#include <liburing.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "prepfs/common/error.h"

namespace prepfs::io {
namespace {

constexpr unsigned kQueueDepth = 16;
constexpr size_t kSegment = 512 * 1024;  // large enough for sequential speed, small enough to overlap

std::atomic<bool> g_fallback_logged{false};
thread_local int t_injected_submit_error = 0;  // testing::fail_next_submit

class Ring {
 public:
  Ring() {
    int rc = io_uring_queue_init(kQueueDepth, &ring_, 0);
    ok_ = rc == 0;
    // Kernels 5.1 to 5.5 make a ring but have no IORING_OP_READ/WRITE (5.6): every completion
    // would be EINVAL, so such a ring is no ring.
    if (ok_) {
      io_uring_probe* probe = io_uring_get_probe_ring(&ring_);
      const bool ops = probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                       io_uring_opcode_supported(probe, IORING_OP_WRITE);
      if (probe) io_uring_free_probe(probe);
      if (!ops) {
        io_uring_queue_exit(&ring_);
        ok_ = false;
        rc = -EOPNOTSUPP;
      }
    }
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
  // (bytes or -errno) in order. Returns or throws only once the kernel holds no request into buf:
  // after a failed submission the requests in flight are cancelled and reaped first.
  std::vector<int> transfer(bool write, int fd, char* buf, size_t len, uint64_t off) {
    size_t nseg = (len + kSegment - 1) / kSegment;
    std::vector<int> res(nseg, 0);
    std::vector<bool> done(nseg, false);
    size_t submitted = 0, completed = 0;
    int failure = 0;  // errno of a failed submission: prepare nothing more, drain, then throw
    unsigned stuck = 0;
    while (completed < submitted || (submitted < nseg && !failure)) {
      while (!failure && submitted < nseg && submitted - completed < kQueueDepth) {
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
      int rc = submit_and_wait();
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        if (!failure) {
          failure = -rc;
          cancel_all(done, submitted);
        } else if (++stuck > kMaxStuckSubmits) {
          // The kernel may still write into buf and we cannot reap it: stopping is the only safe move.
          spdlog::critical("io_uring: cannot drain requests in flight after a failed submission ({}); aborting",
                           std::strerror(failure));
          std::abort();
        }
      }
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        seen++;
        const uint64_t tag = io_uring_cqe_get_data64(cqe);
        if (tag == kCancelAllTag && cqe->res == -EINVAL) cancel_each(done, submitted);  // kernel < 5.19
        if (tag >= nseg) continue;                                                      // a cancel's own completion
        res[tag] = cqe->res;
        done[tag] = true;
        completed++;
      }
      io_uring_cq_advance(&ring_, seen);
    }
    if (failure) throw_errno(failure, "io_uring_submit");
    return res;
  }

 private:
  static constexpr uint64_t kCancelAllTag = ~0ull;
  static constexpr uint64_t kCancelOneTag = ~0ull - 1;
  static constexpr unsigned kMaxStuckSubmits = 1000;

  // An sqe, flushing prepared ones to the kernel first when the submission queue is full.
  io_uring_sqe* free_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe && io_uring_submit(&ring_) >= 0) sqe = io_uring_get_sqe(&ring_);
    return sqe;
  }

  // Asks the kernel to cancel every request of this ring. It is queued behind any read or write
  // still unsubmitted, so those are cancelled too, never started later into a freed buffer.
  void cancel_all(const std::vector<bool>& done, size_t submitted) {
    io_uring_sqe* sqe = free_sqe();
    if (!sqe) return cancel_each(done, submitted);
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, kCancelAllTag);
  }

  // The same, one request at a time (kernels before 5.19 lack CANCEL_ANY).
  void cancel_each(const std::vector<bool>& done, size_t submitted) {
    for (size_t i = 0; i < submitted; i++) {
      if (done[i]) continue;
      io_uring_sqe* sqe = free_sqe();
      if (!sqe) return;  // nothing more to do but wait for them
      io_uring_prep_cancel64(sqe, i, 0);
      io_uring_sqe_set_data64(sqe, kCancelOneTag);
    }
  }

  int submit_and_wait() {
    if (int err = std::exchange(t_injected_submit_error, 0)) {
      io_uring_submit(&ring_);
      return -err;
    }
    return io_uring_submit_and_wait(&ring_, 1);
  }

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

void testing::fail_next_submit(int err) { t_injected_submit_error = err; }

size_t pread_full(int fd, void* buf, size_t len, uint64_t off) {
  char* p = static_cast<char*>(buf);
  Ring& ring = thread_ring();
  if (!ring.ok() || len == 0) return finish_read(fd, p, len, off);
  std::vector<int> res = ring.transfer(false, fd, p, len, off);
  size_t total = 0;
  for (size_t i = 0; i < res.size(); i++) {
    size_t seg_off = i * kSegment, want = std::min(kSegment, len - seg_off);
    // EAGAIN (a non-blocking descriptor) and EINTR end a segment without data: the synchronous
    // path reads it instead.
    const int r = res[i] == -EAGAIN || res[i] == -EINTR ? 0 : res[i];
    if (r < 0) throw_errno(-r, "read");
    size_t got = static_cast<size_t>(r);
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
    const int r = res[i] == -EAGAIN || res[i] == -EINTR ? 0 : res[i];  // as in pread_full
    if (r < 0) throw_errno(-r, "write");
    size_t got = static_cast<size_t>(r);
    if (got < want) finish_write(fd, p + seg_off + got, want - got, off + seg_off + got);
  }
}

}  // namespace prepfs::io

// Positional file I/O through io_uring. Each thread owns a small ring (created on first use), so
// there is no lock on the submit path; a large request is split into segments that are in flight
// together. Where io_uring is unavailable (old kernel, seccomp) it falls back to pread/pwrite once
// and says so in the log.
#pragma once

#include <cstddef>
#include <cstdint>

namespace prepfs::io {

// Reads up to len bytes at off; returns fewer only at end of file. Throws Error on failure.
size_t pread_full(int fd, void* buf, size_t len, uint64_t off);

// Writes all len bytes at off. Throws Error on failure (ENOSPC included).
void pwrite_full(int fd, const void* buf, size_t len, uint64_t off);

// True when this thread's I/O goes through io_uring (for stats and tests).
bool uring_active();

namespace testing {
// Fault injection: this thread's next submission reaches the kernel, then reports -err as if
// io_uring_enter had failed.
void fail_next_submit(int err);
}  // namespace testing

}  // namespace prepfs::io

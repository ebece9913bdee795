// Reads the image headers a first mount did not wait for. The mount lists the source and starts
// serving; header dimensions (which decoded/ and augmented/ need for names and exact sizes) come
// from whichever happens first:
//   - a read of a file's first chunk through raw/ (the store parses the header it already has);
//   - a view that needs them now: a lookup, listing or stat in decoded/ or augmented/ probes that
//     directory's files in parallel (ensure_dir), a file's stat probes the file (ensure); these
//     probes read the first chunk through the store, which keeps it for the read that follows;
//   - a job asking for the sample list (.prepfs/samples: ensure_all). No read follows it soon
//     (staging could not hold a dataset's first chunks until the job reads them), so it reads
//     header bytes only, as the probes at mount do.
// So a first epoch opens each file once (twice when a job asked for the sample list first, but
// fetches its bytes once). There is no background pass: it would race the job for
// the source, in an order the job does not read. At mount, a few headers spread over the tree are
// read (ensure_some) so that the first plan knows roughly how many files are images.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <chrono>
#include <unordered_map>
#include <string>

#include "prepfs/common/log_limiter.h"
#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"
#include "prepfs/store/sample_store.h"

namespace prepfs {

class HeaderProber {
 public:
  HeaderProber(Tree& tree, SampleStore& store, Source& source, unsigned threads);

  void ensure(uint32_t node);
  void ensure_dir(uint32_t dir, unsigned threads = 0);  // every regular child, in parallel (0: all threads)
  void ensure_all();                                    // every header known when it returns (see above)
  // Reads up to `count` unknown headers spread over the tree, header bytes only (nothing cached:
  // the plan at mount needs their sizes, not their data).
  void ensure_some(size_t count);
  bool complete() const { return tree_.unprobed_count() == 0; }
  // Every header is read, or its last read failed. A failed read (a source error, a timeout)
  // leaves the header unread, and a use of the file at least retry_after later reads it again:
  // recorded as "not an image", it hid the file from decoded/ and augmented/ for good, index.bin
  // included. Not sooner: a file that keeps failing would cost a read (an S3 timeout) at every
  // lookup in its directory, and each such lookup a walk of the directory.
  bool settled() const;
  // Headers left unread by the probe at mount (probe=mount: each of those reads failed): tried
  // again at their next use, and counted as failed until then.
  void unread_failed_at_mount();
  void retry_failed_now();  // every failed read's retry is due (tests: they wait 30 s)

 private:
  // whole_chunk: read the first chunk through the store (staged for the read that follows);
  // else only the header bytes. A read that fails leaves the header unread (see settled()).
  void probe(uint32_t node, bool whole_chunk);
  void failed(uint32_t node, const std::string& path, const std::exception& e);
  void read_ok(uint32_t node);
  void probe_dir(uint32_t dir, unsigned threads, bool whole_chunks);
  bool waiting(uint32_t node) const;  // its last read failed, and its retry is not due yet
  // Every header is read, or waits out its retry. O(1) but when the counts changed since the last
  // answer or a retry fell due: then one pass over the failed ones (pruning those read since).
  bool nothing_due();

  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kRetryAfter{30};
  mutable std::mutex failed_mu_;
  std::unordered_map<uint32_t, Clock::time_point> failed_;  // nodes whose last read failed: their next try
  struct Memo {  // nothing_due()'s last "nothing due": valid while the counts stay and until `until`
    uint64_t unread = 0;
    size_t failed = 0;
    Clock::time_point until{};
  } memo_;  // under failed_mu_
  LogLimiter failure_log_;
  Tree& tree_;
  SampleStore& store_;
  Source& source_;
  unsigned threads_;
};

}  // namespace prepfs

// Reads the image headers a first mount did not wait for. The mount lists the source and starts
// serving; header dimensions (which decoded/ and augmented/ need for names and exact sizes) come
// from three places, whichever is first:
//   - a read of a file's first chunk through raw/ (the store parses the header it already has);
//   - a view that needs them now: a lookup, listing or stat in decoded/ or augmented/ probes that
//     directory's files in parallel (ensure_dir), a file's stat probes the file (ensure);
//   - a background pass over every file still unprobed, which also persists the index when done.
// Each probe reads the file's first chunk through the store, which keeps it for the read that
// usually follows, so a first epoch opens each file once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "prepfs/index/tree.h"
#include "prepfs/store/sample_store.h"

namespace prepfs {

class HeaderProber {
 public:
  // on_complete runs on the background thread once every header is known (persist the index).
  HeaderProber(Tree& tree, SampleStore& store, unsigned threads, std::function<void()> on_complete);
  ~HeaderProber();  // stops the background pass
  HeaderProber(const HeaderProber&) = delete;
  HeaderProber& operator=(const HeaderProber&) = delete;

  void ensure(uint32_t node);
  void ensure_dir(uint32_t dir, unsigned threads = 0);  // every regular child, in parallel (0: all threads)
  void ensure_all();                                    // waits until every header is known
  bool complete() const { return tree_.unprobed_count() == 0; }
  void stop();

 private:
  void probe(uint32_t node);
  void background();

  Tree& tree_;
  SampleStore& store_;
  unsigned threads_;
  std::function<void()> on_complete_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool finished_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace prepfs

// What the prefetcher's renders ahead cost while they wait for a cpu slot that the readers keep
// busy (bench/prefetch_wait/README.md). A Daemon over DATASET_DIR (no FUSE) with every cpu slot
// held, as a loader that keeps them all busy would; then, per case, the process's CPU time over
// a few seconds of that wait:
//   idle     no order published: nothing waits (the daemon's own background: profiler, coordinator)
//   waiting  an order of augmented/ opens published: up to prefetch_threads tasks fetch their
//            inputs, then wait for an idle slot
// The cases alternate, each with a fresh Daemon, for --rounds rounds.
#include <fcntl.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "prepfs/common/log.h"
#include "prepfs/common/options.h"
#include "prepfs/common/resource_budget.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/daemon/daemon.h"
#include "prepfs/store/renderer.h"

using namespace prepfs;

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

std::string read_control(Daemon& d, const std::string& name) {
  Filesystem& c = d.control_fs();
  const uint64_t ino = c.lookup(1, name).ino;
  OpenReply r = c.open(ino, O_RDONLY);
  std::string out;
  for (uint64_t off = 0;;) {
    std::vector<Slice> slices = c.read(ino, r.fh, off, 1 << 20);
    if (slices.empty()) break;
    for (const Slice& s : slices) out.append(s.data, s.len), off += s.len;
  }
  c.release(ino, r.fh);
  return out;
}

void write_control(Daemon& d, const std::string& name, const std::string& text) {
  Filesystem& c = d.control_fs();
  const uint64_t ino = c.lookup(1, name).ino;
  OpenReply w = c.open(ino, O_WRONLY);
  c.write(ino, w.fh, 0, text);
  c.release(ino, w.fh);
}

// One case: CPU milliseconds per second of wall time while every slot is held.
double measure(const std::string& dataset, const std::string& cache, bool order, unsigned threads, double seconds,
               unsigned* waiting) {
  Options o;
  o.source = dataset;
  o.mountpoint = "/nonexistent";
  o.ssd_dir = cache;
  o.ram_bytes = 1ull << 30;
  o.ssd_bytes = 0;
  o.log_level = "warn";
  apply_option_list(o, "probe=mount,aug_reuse=1,render_ahead=0,cpu=2,partition=fixed:100/0/0,prefetch_threads=" +
                           std::to_string(threads));
  finalize_options(o);
  Daemon d(o);
  std::vector<ResourceBudget::Hold> slots;  // the readers' renders, all slots busy
  for (ResourceBudget::Hold h; (h = d.renderer().idle_slot()).amount() > 0;) slots.push_back(std::move(h));
  if (order) {
    std::string text = "job bench\n";
    const std::string list = read_control(d, "samples");  // "raw path\timage path" per sample
    for (size_t pos = 0; pos < list.size();) {
      size_t end = list.find('\n', pos);
      if (end == std::string::npos) end = list.size();
      const std::string line = list.substr(pos, end - pos);
      if (size_t tab = line.find('\t'); tab != std::string::npos) text += "augmented/" + line.substr(tab + 1) + "\n";
      pos = end + 1;
    }
    write_control(d, "order", text);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the tasks fetch their inputs and start waiting
  const std::string stats = read_control(d, "stats");
  const size_t at = stats.find("\"slot_waits\": ");
  *waiting = at == std::string::npos ? 0 : unsigned(std::stoul(stats.substr(at + 14)));
  const double c0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return (process_cpu_seconds() - c0) / wall * 1000;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU the prefetcher spends while its renders ahead wait for a busy cpu slot"};
  std::string dataset, cache = "/var/tmp/prepfs-prefetch-wait";
  unsigned rounds = 3, threads = 16;
  double seconds = 3;
  app.add_option("dataset", dataset, "a directory of JPEGs (bench/gen_dataset.py)")->required();
  app.add_option("--cache", cache, "the daemon's ssd_dir");
  app.add_option("--rounds", rounds, "rounds of both cases, interleaved");
  app.add_option("--threads", threads, "prefetch_threads (tasks that may wait at once)");
  app.add_option("--seconds", seconds, "measured seconds per case");
  CLI11_PARSE(app, argc, argv);
  init_logging("warn");
  std::printf("round case     waiting_tasks cpu_ms_per_s\n");
  for (unsigned r = 1; r <= rounds; r++)
    for (bool order : {false, true}) {
      unsigned waiting = 0;
      const double ms = measure(dataset, cache, order, threads, seconds, &waiting);
      std::printf("%5u %-8s %13u %12.1f\n", r, order ? "waiting" : "idle", waiting, ms);
      std::fflush(stdout);
    }
  return 0;
}

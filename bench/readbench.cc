// prepfs-readbench: reads whole files the way a data loader does, and reports throughput and
// per-file latency.
//
//   prepfs-readbench DIR [--threads N] [--list FILE] [--in-order] [--passes P] [--seed S] [--json]
//
// The files (every regular file under DIR, or the paths in --list) are put in a deterministic
// shuffled order, a fresh one per pass (epoch); with --in-order every pass reads the --list as
// given (the order a job published to prepfs, say), or DIR's files sorted by name. N threads each take the next file: open, read()
// into a 1 MiB buffer until EOF, close. Plain POSIX I/O, no io_uring, no O_DIRECT, no readahead
// hints, so the file system sees exactly what a simple loader would send. Passes run one after
// the other, so each pass's numbers are separate (pass 1 cold, pass 2 warm, for example).

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kBufferSize = 1 << 20;

struct Options {
  std::string dir;
  std::string list;
  unsigned threads = 8;
  unsigned passes = 1;
  uint64_t seed = 0;
  bool in_order = false;
  bool json = false;
};

struct PassResult {
  double seconds = 0;
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  std::vector<double> latencies_ms;  // one per successfully read file
};

std::vector<std::string> collect_files(const Options& opts) {
  std::vector<std::string> files;
  if (!opts.list.empty()) {
    std::ifstream in(opts.list);
    if (!in) throw std::runtime_error("cannot open list " + opts.list);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      files.push_back(line.front() == '/' ? line : opts.dir + "/" + line);
    }
  } else {
    // Symlinks are not followed: only regular files count, as a dataset scan would.
    for (const auto& entry : fs::recursive_directory_iterator(opts.dir)) {
      if (!entry.is_symlink() && entry.is_regular_file()) {
        files.push_back(entry.path().string());
      }
    }
  }
  // Sort first so the order depends only on the set of names, not on readdir order.
  if (opts.list.empty() || !opts.in_order) std::sort(files.begin(), files.end());
  return files;
}

// Fisher-Yates with an explicitly specified generator, so the order is the same everywhere
// (std::shuffle and the std distributions are implementation-defined).
void shuffle(std::vector<std::string>& files, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = files.size(); i > 1; --i) std::swap(files[i - 1], files[rng() % i]);
}

// Reads one file completely. Returns bytes read, or -errno.
int64_t read_whole(const std::string& path, char* buf) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int64_t total = 0;
  for (;;) {
    const ssize_t n = read(fd, buf, kBufferSize);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return -err;
    }
    total += n;
  }
  close(fd);
  return total;
}

PassResult run_pass(const std::vector<std::string>& order, unsigned threads) {
  PassResult result;
  std::atomic<size_t> next{0};
  std::mutex merge_mutex;
  std::string first_error;

  auto worker = [&] {
    std::unique_ptr<char[]> buf(new char[kBufferSize]);
    PassResult local;
    std::string local_error;
    for (size_t i = next.fetch_add(1); i < order.size(); i = next.fetch_add(1)) {
      const auto start = Clock::now();
      const int64_t n = read_whole(order[i], buf.get());
      const auto end = Clock::now();
      if (n < 0) {
        ++local.errors;
        if (local_error.empty()) local_error = order[i] + ": " + std::strerror(static_cast<int>(-n));
        continue;
      }
      ++local.files;
      local.bytes += static_cast<uint64_t>(n);
      local.latencies_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
    std::lock_guard lock(merge_mutex);
    result.files += local.files;
    result.bytes += local.bytes;
    result.errors += local.errors;
    result.latencies_ms.insert(result.latencies_ms.end(), local.latencies_ms.begin(), local.latencies_ms.end());
    if (first_error.empty()) first_error = local_error;
  };

  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!first_error.empty()) std::fprintf(stderr, "prepfs-readbench: error: %s\n", first_error.c_str());
  return result;
}

// Nearest-rank percentile of a sorted vector (q in [0, 1]).
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

struct Summary {
  double seconds, files_per_s, mb_per_s, mean_ms, p50_ms, p90_ms, p99_ms, max_ms;
  uint64_t files, bytes, errors;
};

Summary summarize(PassResult r) {
  std::sort(r.latencies_ms.begin(), r.latencies_ms.end());
  double sum = 0;
  for (double v : r.latencies_ms) sum += v;
  const double n = static_cast<double>(r.latencies_ms.size());
  const double secs = std::max(r.seconds, 1e-9);
  return Summary{r.seconds,
                 static_cast<double>(r.files) / secs,
                 static_cast<double>(r.bytes) / 1e6 / secs,
                 n > 0 ? sum / n : 0,
                 percentile(r.latencies_ms, 0.50),
                 percentile(r.latencies_ms, 0.90),
                 percentile(r.latencies_ms, 0.99),
                 r.latencies_ms.empty() ? 0 : r.latencies_ms.back(),
                 r.files,
                 r.bytes,
                 r.errors};
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out;
}

std::string summary_json(const Summary& s) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"files\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.6f,"
                "\"files_per_s\":%.1f,\"mb_per_s\":%.2f,\"lat_mean_ms\":%.4f,\"lat_p50_ms\":%.4f,"
                "\"lat_p90_ms\":%.4f,\"lat_p99_ms\":%.4f,\"lat_max_ms\":%.4f}",
                static_cast<unsigned long long>(s.files), static_cast<unsigned long long>(s.errors),
                static_cast<unsigned long long>(s.bytes), s.seconds, s.files_per_s, s.mb_per_s, s.mean_ms, s.p50_ms,
                s.p90_ms, s.p99_ms, s.max_ms);
  return buf;
}

void print_text(const std::string& label, const Summary& s) {
  std::printf(
      "%-6s files %llu  %.1f files/s  %.1f MB/s  p50 %.3f ms  p99 %.3f ms  "
      "total %llu bytes in %.3f s",
      label.c_str(), static_cast<unsigned long long>(s.files), s.files_per_s, s.mb_per_s, s.p50_ms, s.p99_ms,
      static_cast<unsigned long long>(s.bytes), s.seconds);
  if (s.errors != 0) std::printf("  ERRORS %llu", static_cast<unsigned long long>(s.errors));
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  CLI::App app{"prepfs-readbench: whole-file read benchmark (open, read until EOF, close)"};
  app.add_option("DIR", opts.dir, "Directory to read (and base for relative --list paths)")->required();
  app.add_option("--threads", opts.threads, "Reader threads")->check(CLI::Range(1u, 4096u));
  app.add_option("--list", opts.list, "File with one path per line instead of scanning DIR");
  app.add_option("--passes", opts.passes, "Passes (epochs), each in a fresh shuffled order")
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--seed", opts.seed, "Shuffle seed");
  app.add_flag("--in-order", opts.in_order, "Read the --list in its own order every pass (DIR's files: by name)");
  app.add_flag("--json", opts.json, "Print one JSON object instead of text");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> files;
  try {
    files = collect_files(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepfs-readbench: %s\n", e.what());
    return 1;
  }
  if (files.empty()) {
    std::fprintf(stderr, "prepfs-readbench: no files under %s\n", opts.dir.c_str());
    return 1;
  }

  PassResult all;
  std::vector<Summary> passes;
  for (unsigned p = 0; p < opts.passes; ++p) {
    std::vector<std::string> order = files;
    if (!opts.in_order) shuffle(order, opts.seed + p);
    PassResult r = run_pass(order, opts.threads);
    all.seconds += r.seconds;
    all.files += r.files;
    all.bytes += r.bytes;
    all.errors += r.errors;
    all.latencies_ms.insert(all.latencies_ms.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    passes.push_back(summarize(std::move(r)));
  }
  const Summary total = summarize(std::move(all));

  if (opts.json) {
    std::string out = "{\"dir\":\"" + json_escape(opts.dir) + "\",\"threads\":" + std::to_string(opts.threads) +
                      ",\"passes\":" + std::to_string(opts.passes) +
                      ",\"unique_files\":" + std::to_string(files.size()) + ",\"total\":" + summary_json(total) +
                      ",\"per_pass\":[";
    for (size_t i = 0; i < passes.size(); ++i) {
      if (i != 0) out += ',';
      out += summary_json(passes[i]);
    }
    out += "]}";
    std::puts(out.c_str());
  } else {
    std::printf("%s: %zu files, %u threads, %u pass(es)\n", opts.dir.c_str(), files.size(), opts.threads, opts.passes);
    if (passes.size() > 1) {
      for (size_t i = 0; i < passes.size(); ++i) {
        print_text("pass" + std::to_string(i + 1), passes[i]);
      }
    }
    print_text("total", total);
  }
  return total.errors == 0 ? 0 : 2;
}

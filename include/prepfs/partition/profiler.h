// The partition model's online profiler (docs/MODEL.md, "Symbols"). Every tick it
// takes the deltas of counters the layers keep anyway (source, SSD tier, renderer, views, FUSE
// replies) and folds each tick's measurement into an EWMA; the layers pay a few relaxed atomic
// adds per operation and nothing else. inputs() turns the EWMAs into model::Inputs, with stated
// priors where nothing was measured yet.
//
// Bandwidths are lower bounds of a capacity: a bandwidth is only seen when something loads the
// resource, and a light load shows little. Each is the larger of two lower bounds: the EWMA of
// one request's throughput (bytes over the request's own time), and the highest aggregate rate
// seen over a tick (bytes over the tick's wall time), held and decayed by 1% per tick so an old
// burst is forgotten in minutes but an idle second does not erase it. The source has a third:
// bytes over the time it had at least one read in flight, which equals its bandwidth when it is
// saturated (a capped source is then busy all the time) and is never below the tick rate.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/stats.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/index/tree.h"
#include "prepfs/model/ewma.h"
#include "prepfs/model/inputs.h"
#include "prepfs/source/source.h"

namespace prepfs {

// What the profiler watches; every reference must outlive it.
struct ProfilerSources {
  const Tree& tree;
  const SampleShapes& shapes;  // which files are samples, and their sizes per form
  Source& source;
  TierManager& cache;
  const RenderCounters& renders;
  const ViewCounters& views;
  const ReplyCounters& replies;
  unsigned fuse_threads = 64;  // the source concurrency the daemon allows (C_src)
  unsigned aug_reuse = 1;
  unsigned cores = 1;  // the renderer's cpu= slots (RenderCounters::cpu_slots, when set, is the current count)
};

struct ProfilerConfig {
  double alpha = 0.3;  // EWMA weight of each tick's measurement (rates, shares)
  // Per-operation costs (CPU per render, latency per source read) weigh each operation: a tick
  // with 300 renders replaces 95% of the estimate, a tick with 3 only 3%. Per-tick weighting
  // converged over tens of seconds when epochs last under a second (the fill epoch's costs lingered).
  double sample_alpha = 0.01;
  double peak_decay = 0.99;          // per tick, of the held aggregate-rate peaks
  uint64_t size_refresh_ticks = 60;  // mean sizes are recomputed (O(files)) this often
  // A cost the plan stops exercising is never measured again, and the plan could lock onto a
  // value measured once under load (issue 13: variants cached at aug_reuse=4 because renders from
  // pixels once measured 0.44 ms; none was rendered from pixels after that). After this many
  // ticks without a render from pixels, c_aug' follows the augment-from-JPEG cost at the ratio
  // last measured between them, and that ratio ages toward the prior share with this half-life, so
  // the plan tries pixels again and measures them.
  uint64_t stale_ticks = 60;
  double stale_half_life_ticks = 120;
};

// Priors, where nothing has been measured yet. The source's are "remote storage", the premise of
// the design; the CPU's are bench/transform/README.md's on this machine class (500x375 JPEGs, the
// default pipeline): a decode 1.17 ms; a variant from the JPEG 1.14 ms (crop decode skips the
// IDCT outside the crop, so it costs about a full decode); a variant from cached decoded pixels
// 0.13-0.14 ms (the SIMD resampler on the crop alone).
struct ProfilerPriors {
  static constexpr double kSrcLatency = 2e-3;     // s per request
  static constexpr double kSrcBandwidth = 100e6;  // B/s
  // Until the SSD tier and the FUSE replies are timed: a SATA-class SSD, a memory copy.
  static constexpr double kSsdRead = 500e6;                 // B/s
  static constexpr double kSsdWrite = 300e6;                // B/s
  static constexpr double kCopyPerCore = 2e9;               // B/s
  static constexpr double kDecode = 1.2e-3;                 // s per sample
  static constexpr double kDecodeShareOfAugment = 1.0;      // c_dec / (c_dec + c_aug)
  static constexpr double kAugmentFromDecodedShare = 0.12;  // c_aug' / (c_dec + c_aug)
};

// An input the model gets without a measurement behind it.
struct ProfileNote {
  std::string input;  // the model::Inputs field: "c_dec", "src_bandwidth", ...
  std::string text;   // the value used and why, for .prepfs/plan
  bool prior = true;  // true: a stated prior value; false: left at 0, so unconstrained
};

// Everything the profiler knows, as the model uses it (priors substituted; see notes).
struct Profile {
  uint64_t ticks = 0;
  double samples = 0;                         // images in the tree
  std::array<double, kForms> size{};          // mean bytes per sample, indexed by Form
  double ram_capacity = 0, ssd_capacity = 0;  // tier budgets, bytes
  double recent_floor = 0;                     // RamTier::kRecentFloor

  // Source. latency: EWMA of (read time / reads) per tick. concurrency_in_use: EWMA of (read time
  // / tick wall time), the mean reads in flight (Little's law), over ticks that had reads.
  double src_latency = 0;
  double src_concurrency_in_use = 0;
  double src_concurrency = 1;  // what the model is given: the FUSE thread count
  double src_stream_bw = 0;    // EWMA of bytes / read time: one request's throughput
  double src_peak_bw = 0;      // held peak of bytes / tick wall time, decayed per tick
  double src_busy_bw = 0;      // EWMA of bytes / time with a read in flight (= the bandwidth when saturated)
  double src_bandwidth = 0;    // max of the three: a lower bound of the source's bandwidth

  // SSD tier. Reads run on the FUSE workers, in parallel: read_bw = max(EWMA of one read's
  // throughput, held peak of bytes read per tick wall second), a lower bound. Writes run on the
  // tier's single writer thread, one at a time: write_bw = EWMA of bytes / writer busy time,
  // exactly the rate that thread can write at.
  double ssd_read_stream_bw = 0;
  double ssd_read_peak_bw = 0;
  double ssd_read_bw = 0;
  double ssd_write_bw = 0;

  // CPU seconds per sample (thread CPU time): EWMAs of each tick's mean.
  double c_dec = 0;               // a decoded/ render (decode + encode)
  double c_aug_from_jpeg = 0;     // a whole augmented render from JPEG bytes (decode + augment)
  double c_aug = 0;               // c_aug_from_jpeg - c_dec, floored at 0 (the model's c_aug)
  double c_aug_from_decoded = 0;  // an augmented render from cached decoded pixels
  double cores = 1;               // the renderer's cpu= slots

  // FUSE copy: EWMA of reply bytes / time inside the reply calls (one thread's copy rate), and
  // that times the cores, since copies run in parallel on the workers (the model's copy_bw).
  double copy_call_bw = 0;
  double copy_bw = 0;

  // Request mix: EWMA of each view's share of the samples requested per tick (raw/ and decoded/
  // reads at offset 0 of an image; augmented/ opens), and the dominant view (raw before any).
  std::array<double, kForms> view_share{};
  Form view = Form::raw;
  double aug_reuse = 1;

  std::vector<ProfileNote> notes;  // inputs without a measurement behind them

  model::Inputs inputs() const;  // what the model is given (consumer_rate stays unknown)
};

class Profiler {
 public:
  explicit Profiler(const ProfilerSources& s, ProfilerConfig cfg = {});
  ~Profiler();  // stops the thread
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // One measurement window ending now (since the previous tick, or construction).
  void tick();
  // The same over a window of the given wall time (tests drive the clock with it).
  void tick_window(std::chrono::nanoseconds wall);

  // A background thread that calls tick() and then every on_tick callback, each period.
  void start(std::chrono::milliseconds period);
  void stop();  // safe to call twice
  // Called after each tick on the profiler's thread (the planner re-plans from there).
  void on_tick(std::function<void()> fn);

  // Recomputes the mean sizes per form and the sample count from the index (O(files); also done
  // every size_refresh_ticks): after the image headers a first mount read lazily are all known.
  void refresh_sizes();

  Profile profile() const;
  model::Inputs inputs() const { return profile().inputs(); }
  // The same, with the inputs that stand on priors (or are unknown) listed in *notes, one line
  // each, for .prepfs/plan. One profile for both, so the notes describe exactly these inputs.
  model::Inputs inputs(std::string* notes) const;

  // Samples the views have served since mount (raw/ and decoded/ samples, augmented/ opens): how
  // far into its job the reader is, for the planner's payback horizon.
  uint64_t samples_served() const;

 private:
  // Counter values at a tick; a window is the difference of two.
  struct Snapshot {
    uint64_t src_reads = 0, src_bytes = 0, src_ns = 0, src_busy_ns = 0;
    uint64_t ssd_read_bytes = 0, ssd_read_ns = 0, ssd_write_bytes = 0, ssd_write_ns = 0;
    uint64_t decoded = 0, decode_ns = 0;
    uint64_t augmented = 0, from_decoded = 0, augment_ns = 0, augment_from_decoded_ns = 0;
    uint64_t reply_bytes = 0, reply_ns = 0;
    std::array<uint64_t, kForms> view_samples{};
    Snapshot operator-(const Snapshot& o) const;
  };
  // A maximum that decays each tick: a capacity's lower bound that one idle window cannot erase.
  struct DecayingPeak {
    double value = 0;
    void update(double x, double decay) { value = std::max(x, value * decay); }
  };

  Snapshot read_counters() const;
  std::array<uint64_t, kForms> view_counts() const;  // the counters samples_served() sums
  void update_source(const Snapshot& d, double wall_ns);
  void update_ssd(const Snapshot& d, double wall_ns);
  void update_cpu(const Snapshot& d);
  void update_copy(const Snapshot& d);
  void update_views(const Snapshot& d);
  void run(std::chrono::milliseconds period);

  ProfilerSources src_;
  ProfilerConfig cfg_;

  mutable std::mutex mu_;  // guards everything below up to the thread's state
  Snapshot last_;
  std::chrono::steady_clock::time_point last_tick_;
  uint64_t ticks_ = 0;
  double samples_ = 0;
  std::array<double, kForms> size_{};
  model::Ewma src_latency_, src_in_flight_, src_stream_bw_, src_busy_bw_;
  DecayingPeak src_peak_bw_;
  model::Ewma ssd_read_stream_bw_, ssd_write_bw_;
  DecayingPeak ssd_read_peak_bw_;
  model::Ewma c_dec_, c_aug_jpeg_, c_aug_dec_;
  double aug_dec_ratio_ = 0;     // c_aug' / (c_dec + c_aug) when c_aug' was last measured (0: never both)
  uint64_t aug_dec_tick_ = 0;    // the tick it was last measured in
  model::Ewma copy_call_bw_;
  std::array<model::Ewma, kForms> view_share_;
  // The dominant view, with hysteresis (update_views): raw before any request.
  Form view_ = Form::raw;
  static constexpr double kViewHysteresis = 0.2;  // another view leads by this share to take over

  std::mutex cb_mu_;
  std::vector<std::function<void()>> callbacks_;

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point last_failure_log_{};  // of a callback; the thread's own
  std::thread thread_;
};

}  // namespace prepfs

#include "prepfs/partition/profiler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>

#include "prepfs/cache/ram_tier.h"

namespace prepfs {
namespace {

// Counters only grow; a difference that would wrap (never expected) reads as nothing happened.
uint64_t sub(uint64_t a, uint64_t b) { return a >= b ? a - b : 0; }

double per_second(uint64_t bytes, double ns) { return ns > 0 ? double(bytes) / (ns / 1e9) : 0; }

}  // namespace

Profiler::Snapshot Profiler::Snapshot::operator-(const Snapshot& o) const {
  Snapshot d;
  d.src_reads = sub(src_reads, o.src_reads);
  d.src_bytes = sub(src_bytes, o.src_bytes);
  d.src_ns = sub(src_ns, o.src_ns);
  d.src_busy_ns = sub(src_busy_ns, o.src_busy_ns);
  d.ssd_read_bytes = sub(ssd_read_bytes, o.ssd_read_bytes);
  d.ssd_read_ns = sub(ssd_read_ns, o.ssd_read_ns);
  d.ssd_write_bytes = sub(ssd_write_bytes, o.ssd_write_bytes);
  d.ssd_write_ns = sub(ssd_write_ns, o.ssd_write_ns);
  d.decoded = sub(decoded, o.decoded);
  d.decode_ns = sub(decode_ns, o.decode_ns);
  d.augmented = sub(augmented, o.augmented);
  d.from_decoded = sub(from_decoded, o.from_decoded);
  d.augment_ns = sub(augment_ns, o.augment_ns);
  d.augment_from_decoded_ns = sub(augment_from_decoded_ns, o.augment_from_decoded_ns);
  d.reply_bytes = sub(reply_bytes, o.reply_bytes);
  d.reply_ns = sub(reply_ns, o.reply_ns);
  for (size_t f = 0; f < kForms; f++) d.view_samples[f] = sub(view_samples[f], o.view_samples[f]);
  return d;
}

Profiler::Profiler(const ProfilerSources& s, ProfilerConfig cfg)
    : src_(s), cfg_(cfg), last_tick_(std::chrono::steady_clock::now()) {
  for (model::Ewma* e :
       {&src_in_flight_, &src_stream_bw_, &src_busy_bw_, &ssd_read_stream_bw_, &ssd_write_bw_, &copy_call_bw_})
    *e = model::Ewma(cfg_.alpha);
  for (model::Ewma* e : {&src_latency_, &c_dec_, &c_aug_jpeg_, &c_aug_dec_}) *e = model::Ewma(cfg_.sample_alpha);
  for (model::Ewma& e : view_share_) e = model::Ewma(cfg_.alpha);
  last_ = read_counters();  // the first window starts now, not at the mount's first byte
  refresh_sizes();
}

Profiler::~Profiler() { stop(); }

Profiler::Snapshot Profiler::read_counters() const {
  Snapshot s;
  const SourceCounters& sc = src_.source.counters();
  s.src_reads = load(sc.reads);
  s.src_bytes = load(sc.bytes);
  s.src_ns = load(sc.read_ns);
  s.src_busy_ns = busy_ns_now(sc);
  const TierCounters& ssd = src_.cache.counters().ssd;
  s.ssd_read_bytes = load(ssd.read_bytes);
  s.ssd_read_ns = load(ssd.read_ns);
  s.ssd_write_bytes = load(ssd.write_bytes);
  s.ssd_write_ns = load(ssd.write_ns);
  const RenderCounters& rc = src_.renders;
  s.decoded = load(rc.decoded);
  s.decode_ns = load(rc.decode_cpu_ns);
  s.augmented = load(rc.augmented);
  s.from_decoded = load(rc.from_decoded);
  s.augment_ns = load(rc.augment_cpu_ns);
  s.augment_from_decoded_ns = load(rc.augment_from_decoded_cpu_ns);
  s.reply_bytes = load(src_.replies.bytes);
  s.reply_ns = load(src_.replies.ns);
  s.view_samples = view_counts();
  return s;
}

std::array<uint64_t, kForms> Profiler::view_counts() const {
  return {load(src_.views.raw_samples), load(src_.views.decoded_samples), load(src_.views.augmented_opens)};
}

uint64_t Profiler::samples_served() const {
  uint64_t n = 0;
  for (uint64_t v : view_counts()) n += v;
  return n;
}

// Sizes are properties of the tree rather than measurements: exact means, recomputed now and then
// because revalidation may change a file.
void Profiler::refresh_sizes() {
  double n = 0, raw = 0, decoded = 0, augmented = 0;
  const Tree& t = src_.tree;
  // A header claiming more than max_pixels is no sample (refused, EIO, never cached): counting its
  // decoded size would let one such file make the mean decoded sample look gigabytes large.
  for_each_sample(t, src_.shapes, [&](uint32_t id) {
    n++;
    raw += double(t.version(id).size);
    decoded += double(src_.shapes.decoded_size(t.dims(id)));
    augmented += double(src_.shapes.augmented_size(t.dims(id)));
  });
  // Files whose header a lazy first mount has not read yet count as samples in the proportion the
  // read ones are, with the read ones' mean derived sizes (the plan at mount needs a count).
  double unknown = 0, unknown_raw = 0, known_files = 0;
  for (uint32_t id = 0; id < t.size(); id++) {
    if (!S_ISREG(t.mode(id))) continue;
    if (t.dims(id).known()) {
      known_files++;
    } else {
      unknown++;
      unknown_raw += double(t.version(id).size);
    }
  }
  if (unknown > 0 && n > 0) {
    const double share = n / known_files;
    decoded += decoded / n * unknown * share;
    augmented += augmented / n * unknown * share;
    raw += unknown_raw * share;
    n += unknown * share;
  }
  std::lock_guard lock(mu_);
  samples_ = n;
  size_ = n > 0 ? std::array<double, kForms>{raw / n, decoded / n, augmented / n} : std::array<double, kForms>{};
}

void Profiler::tick() {
  auto now = std::chrono::steady_clock::now();
  std::chrono::nanoseconds wall;
  {
    std::lock_guard lock(mu_);
    wall = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_tick_);
    last_tick_ = now;
  }
  tick_window(wall);
}

void Profiler::tick_window(std::chrono::nanoseconds wall) {
  bool refresh;
  {
    std::lock_guard lock(mu_);
    Snapshot now = read_counters();
    Snapshot d = now - last_;
    last_ = now;
    double wall_ns = double(wall.count());
    update_source(d, wall_ns);
    update_ssd(d, wall_ns);
    update_cpu(d);
    update_copy(d);
    update_views(d);
    ticks_++;
    refresh = cfg_.size_refresh_ticks > 0 && ticks_ % cfg_.size_refresh_ticks == 0;
  }
  if (refresh) refresh_sizes();
}

// Latency and concurrency only from windows with reads: they describe the source while in use.
// The peak is updated every window so that it decays while the source is idle.
void Profiler::update_source(const Snapshot& d, double wall_ns) {
  src_peak_bw_.update(wall_ns > 0 ? per_second(d.src_bytes, wall_ns) : 0, cfg_.peak_decay);
  if (d.src_reads == 0 || d.src_ns == 0) return;
  src_latency_.update_mean(double(d.src_ns) / 1e9 / double(d.src_reads), double(d.src_reads));
  if (wall_ns > 0) src_in_flight_.update(double(d.src_ns) / wall_ns);
  src_stream_bw_.update(per_second(d.src_bytes, double(d.src_ns)));
  // Bytes over the time the source had work: at saturation that is its bandwidth, below it a
  // tighter lower bound than bytes over wall time (an idle source says nothing of its capacity).
  if (d.src_busy_ns > 0) src_busy_bw_.update(per_second(d.src_bytes, double(d.src_busy_ns)));
}

void Profiler::update_ssd(const Snapshot& d, double wall_ns) {
  ssd_read_peak_bw_.update(wall_ns > 0 ? per_second(d.ssd_read_bytes, wall_ns) : 0, cfg_.peak_decay);
  if (d.ssd_read_bytes > 0 && d.ssd_read_ns > 0)
    ssd_read_stream_bw_.update(per_second(d.ssd_read_bytes, double(d.ssd_read_ns)));
  if (d.ssd_write_bytes > 0 && d.ssd_write_ns > 0)
    ssd_write_bw_.update(per_second(d.ssd_write_bytes, double(d.ssd_write_ns)));
}

// A render's count is bumped just before its CPU time, so a window may hold one without the
// other; requiring both skips such a window rather than averaging in a zero.
void Profiler::update_cpu(const Snapshot& d) {
  auto mean = [](model::Ewma& e, uint64_t ns, uint64_t count) {
    if (count > 0 && ns > 0) e.update_mean(double(ns) / 1e9 / double(count), double(count));
  };
  mean(c_dec_, d.decode_ns, d.decoded);
  mean(c_aug_jpeg_, d.augment_ns, sub(d.augmented, d.from_decoded));
  mean(c_aug_dec_, d.augment_from_decoded_ns, d.from_decoded);
  if (d.from_decoded > 0 && d.augment_from_decoded_ns > 0) {
    aug_dec_tick_ = ticks_;
    if (c_aug_jpeg_.has_value() && c_aug_jpeg_.value() > 0) aug_dec_ratio_ = c_aug_dec_.value() / c_aug_jpeg_.value();
  }
}

void Profiler::update_copy(const Snapshot& d) {
  if (d.reply_bytes > 0 && d.reply_ns > 0) copy_call_bw_.update(per_second(d.reply_bytes, double(d.reply_ns)));
}

void Profiler::update_views(const Snapshot& d) {
  uint64_t total = 0;
  for (uint64_t n : d.view_samples) total += n;
  if (total == 0) return;  // an idle window says nothing about the mix
  const bool first = !view_share_[0].has_value();
  for (size_t f = 0; f < kForms; f++) view_share_[f].update(double(d.view_samples[f]) / double(total));
  // The view another one leads clearly, or the largest at the first request: two jobs at about
  // the same rate on two views would otherwise flip it tick after tick, and each flip re-plans
  // (a plan for another view can move the whole cache).
  size_t best = 0;
  for (size_t f = 1; f < kForms; f++)
    if (view_share_[f].value() > view_share_[best].value()) best = f;
  const double lead = view_share_[best].value() - view_share_[index_of(view_)].value();
  if (first || lead > kViewHysteresis) view_ = kAllForms[best];
}

Profile Profiler::profile() const {
  std::lock_guard lock(mu_);
  Profile p;
  p.ticks = ticks_;
  p.samples = samples_;
  p.size = size_;
  p.ram_capacity = double(src_.cache.stats(Tier::ram).budget);
  p.recent_floor = double(RamTier::kRecentFloor);
  p.ssd_capacity = double(src_.cache.stats(Tier::ssd).budget);
  p.aug_reuse = src_.aug_reuse;
  // cpu=auto moves the renderer's slot count; the model plans with the count of the moment.
  const uint64_t slots = load(src_.renders.cpu_slots);
  p.cores = slots > 0 ? double(slots) : src_.cores;
  auto prior = [&](const char* input, std::string text) { p.notes.push_back({input, std::move(text), true}); };

  p.src_concurrency = src_.fuse_threads;
  if (src_latency_.has_value()) {
    p.src_latency = src_latency_.value();
    p.src_concurrency_in_use = src_in_flight_.value();
    p.src_stream_bw = src_stream_bw_.value();
    p.src_peak_bw = src_peak_bw_.value;
    p.src_busy_bw = src_busy_bw_.value();
    p.src_bandwidth = std::max({p.src_stream_bw, p.src_peak_bw, p.src_busy_bw});
  } else {
    p.src_latency = ProfilerPriors::kSrcLatency;
    p.src_bandwidth = ProfilerPriors::kSrcBandwidth;
    prior("src_latency", "prior 2 ms per request (remote storage; nothing read from the source yet)");
    prior("src_bandwidth", "prior 100 MB/s (remote storage; nothing read from the source yet)");
  }

  if (ssd_read_stream_bw_.has_value()) {
    p.ssd_read_stream_bw = ssd_read_stream_bw_.value();
    p.ssd_read_peak_bw = ssd_read_peak_bw_.value;
    p.ssd_read_bw = std::max(p.ssd_read_stream_bw, p.ssd_read_peak_bw);
  } else if (p.ssd_capacity > 0) {
    p.ssd_read_bw = ProfilerPriors::kSsdRead;
    prior("ssd_read_bw", "prior 500 MB/s (nothing read from the SSD tier yet)");
  }
  if (ssd_write_bw_.has_value()) {
    p.ssd_write_bw = ssd_write_bw_.value();
  } else if (p.ssd_capacity > 0) {
    p.ssd_write_bw = ProfilerPriors::kSsdWrite;
    prior("ssd_write_bw", "prior 300 MB/s (nothing written to the SSD tier yet)");
  }

  double dec = c_dec_.value(), aug_jpeg = c_aug_jpeg_.value(), aug_dec = c_aug_dec_.value();
  using Priors = ProfilerPriors;
  if (!c_dec_.has_value() && c_aug_jpeg_.has_value()) {
    dec = Priors::kDecodeShareOfAugment * aug_jpeg;
    prior("c_dec", fmt::format("prior {:g} x the measured augment-from-JPEG cost (nothing decoded yet)",
                               Priors::kDecodeShareOfAugment));
  } else if (!c_dec_.has_value()) {
    dec = Priors::kDecode;
    prior("c_dec", fmt::format("prior {:g} ms (nothing decoded yet)", Priors::kDecode * 1e3));
  }
  if (!c_aug_jpeg_.has_value()) {
    aug_jpeg = dec / Priors::kDecodeShareOfAugment;
    prior("c_aug", fmt::format("prior c_dec + c_aug = c_dec / {:g} (nothing augmented from JPEG yet)",
                               Priors::kDecodeShareOfAugment));
  }
  if (!c_aug_dec_.has_value()) {
    aug_dec = Priors::kAugmentFromDecodedShare * aug_jpeg;
    prior("c_aug_from_decoded",
          fmt::format("prior {:g} x the augment-from-JPEG cost (nothing augmented from pixels yet)",
                      Priors::kAugmentFromDecodedShare));
  } else if (const uint64_t age = ticks_ - aug_dec_tick_; age > cfg_.stale_ticks && aug_dec_ratio_ > 0) {
    // Stale (ProfilerConfig::stale_ticks): scaled with the cost measured since, ageing to the prior.
    const double keep = std::pow(0.5, double(age - cfg_.stale_ticks) / cfg_.stale_half_life_ticks);
    const double ratio =
        Priors::kAugmentFromDecodedShare + keep * (aug_dec_ratio_ - Priors::kAugmentFromDecodedShare);
    aug_dec = ratio * aug_jpeg;
    p.notes.push_back({"c_aug_from_decoded",
                       fmt::format("nothing rendered from pixels for {} ticks: {:.3f} x the augment-from-JPEG "
                                   "cost (last measured {:.3f} x, ageing toward the prior {:g} x)",
                                   age, ratio, aug_dec_ratio_, Priors::kAugmentFromDecodedShare),
                       true});  // an assumption about the input, as a prior is
  }
  p.c_dec = dec;
  p.c_aug_from_jpeg = aug_jpeg;
  // Not floored at 0: with DCT scaling an augmented render decodes at reduced size and can cost
  // less than a decoded/ render (full decode + encode). The model only uses c_dec + c_aug (the
  // augmented miss, measured as such) and c_dec alone (the decoded/ miss), so both stay exact.
  p.c_aug = aug_jpeg - dec;
  p.c_aug_from_decoded = aug_dec;

  if (copy_call_bw_.has_value()) {
    p.copy_call_bw = copy_call_bw_.value();
    p.copy_bw = p.copy_call_bw * p.cores;
  } else {
    p.copy_call_bw = ProfilerPriors::kCopyPerCore;
    p.copy_bw = p.copy_call_bw * p.cores;
    prior("copy_bw", "prior 2 GB/s per core (no read replied yet)");
  }

  for (size_t f = 0; f < kForms; f++) p.view_share[f] = view_share_[f].value();
  p.view = view_;
  return p;
}

model::Inputs Profile::inputs() const {
  model::Inputs in;
  in.size = size;
  in.samples = samples;
  in.ram_capacity = ram_capacity;
  in.recent_floor = recent_floor;
  in.ssd_capacity = ssd_capacity;
  in.src_bandwidth = src_bandwidth;
  in.src_latency = src_latency;
  in.src_concurrency = src_concurrency;
  in.ssd_read_bw = ssd_read_bw;
  in.ssd_write_bw = ssd_write_bw;
  in.c_dec = c_dec;
  in.c_aug = c_aug;
  in.c_aug_from_decoded = c_aug_from_decoded;
  in.cores = cores;
  in.copy_bw = copy_bw;
  in.view = view;
  in.aug_reuse = aug_reuse;
  return in;
}

void Profiler::on_tick(std::function<void()> fn) {
  std::lock_guard lock(cb_mu_);
  callbacks_.push_back(std::move(fn));
}

void Profiler::start(std::chrono::milliseconds period) {
  std::lock_guard lock(run_mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this, period] { run(period); });
}

void Profiler::stop() {
  {
    std::lock_guard lock(run_mu_);
    stopping_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Profiler::run(std::chrono::milliseconds period) {
  std::unique_lock lock(run_mu_);
  while (!run_cv_.wait_for(lock, period, [&] { return stopping_; })) {
    lock.unlock();
    tick();
    std::vector<std::function<void()>> fns;
    {
      std::lock_guard cb_lock(cb_mu_);
      fns = callbacks_;
    }
    for (const auto& fn : fns) {
      try {
        fn();
      } catch (const std::exception& e) {  // a failed re-plan must not stop the measurements
        auto now = std::chrono::steady_clock::now();
        if (now - last_failure_log_ >= std::chrono::minutes(1)) {  // a failure per tick: log a few
          spdlog::warn("profiler: a tick callback failed: {}", e.what());
          last_failure_log_ = now;
        }
      }
    }
    lock.lock();
  }
}

model::Inputs Profiler::inputs(std::string* notes) const {
  Profile p = profile();
  if (notes) {
    std::string n;
    for (const ProfileNote& note : p.notes) n += "  " + note.input + ": " + note.text + "\n";
    n += "  not measured (unconstrained): consumer rate\n";
    *notes = n;
  }
  return p.inputs();
}

}  // namespace prepfs

// The model's equations; docs/MODEL.md derives them.
#include "prepfs/model/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace prepfs::model {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::size_t idx(Form f, Tier t) { return static_cast<std::size_t>(f) * kTiers + static_cast<std::size_t>(t); }

Usage minus(const Usage& a, const Usage& b) {
  return {a.cpu_s - b.cpu_s,
          a.ssd_read_bytes - b.ssd_read_bytes,
          a.ssd_write_bytes - b.ssd_write_bytes,
          a.source_bytes - b.source_bytes,
          a.source_requests - b.source_requests,
          a.copy_bytes - b.copy_bytes};
}

void add_scaled(Usage& acc, const Usage& u, double k) {
  acc.cpu_s += k * u.cpu_s;
  acc.ssd_read_bytes += k * u.ssd_read_bytes;
  acc.ssd_write_bytes += k * u.ssd_write_bytes;
  acc.source_bytes += k * u.source_bytes;
  acc.source_requests += k * u.source_requests;
  acc.copy_bytes += k * u.copy_bytes;
}

// Seconds of each resource that usage u costs; 0 for unconstrained resources. `requests` is the
// number of consumer requests u stands for (1 for a whole request, 0 for a difference of two).
std::array<double, kResources> loads(const Inputs& in, const Usage& u, double requests) {
  std::array<double, kResources> l{};
  auto per = [](double amount, double capacity) { return capacity > 0 ? amount / capacity : 0.0; };
  l[static_cast<std::size_t>(Resource::kCpu)] = per(u.cpu_s, in.cores);
  l[static_cast<std::size_t>(Resource::kSsd)] =
      per(u.ssd_read_bytes, in.ssd_read_bw) + per(u.ssd_write_bytes, in.ssd_write_bw);
  l[static_cast<std::size_t>(Resource::kSourceBytes)] = per(u.source_bytes, in.src_bandwidth);
  l[static_cast<std::size_t>(Resource::kSourceRequests)] = per(u.source_requests, in.src_request_rate());
  l[static_cast<std::size_t>(Resource::kCopy)] = per(u.copy_bytes, in.copy_bw);
  l[static_cast<std::size_t>(Resource::kConsumer)] = per(requests, in.consumer_rate);
  return l;
}

// Usage of one request for the consumer's view when the sample is not cached (a miss), and when
// it is cached in form f in tier t. Each sample is cached in at most one (form, tier).
Usage miss_usage(const Inputs& in) {
  const double s_raw = in.size_of(Form::raw);
  Usage u;
  u.source_bytes = s_raw;
  u.source_requests = 1;
  switch (in.view) {
    case Form::raw: u.copy_bytes = s_raw; break;
    case Form::decoded:
      u.cpu_s = in.c_dec;
      u.copy_bytes = in.size_of(Form::decoded);
      break;
    case Form::augmented:
      u.cpu_s = in.c_dec + in.c_aug;
      u.copy_bytes = in.size_of(Form::augmented);
      break;
  }
  return u;
}

Usage hit_usage(const Inputs& in, Form f, Tier t) {
  const Usage miss = miss_usage(in);
  const double s_f = in.size_of(f);
  const bool ssd = t == Tier::ssd;
  Usage u;
  u.copy_bytes = miss.copy_bytes;  // the reply to the consumer
  if (f == Form::raw) {
    // Everything a miss does but the fetch.
    u.cpu_s = miss.cpu_s;
    if (ssd) u.ssd_read_bytes = s_f;
    return u;
  }
  if (f == Form::decoded) {
    if (in.view == Form::raw) return miss;  // decoded pixels cannot serve raw bytes
    u.cpu_s = in.view == Form::augmented ? in.c_aug_from_decoded : 0.0;
    if (ssd) u.ssd_read_bytes = s_f;
    if (!ssd && in.variant_beside_pixels()) {
      // The variant is kept beside the pixels (Inputs::slot_size): one request in R renders it
      // from them and stores it (a memory copy), the other R-1 read it.
      const double r = in.aug_reuse;
      u.cpu_s /= r;
      u.copy_bytes += in.size_of(Form::augmented) / r;
    }
    return u;
  }
  // Augmented.
  if (in.view != Form::augmented) return miss;
  // A variant serves R requests: one generates it (a miss, plus storing it in the tier), the
  // other R-1 read it from the tier.
  const double r = std::max(1.0, in.aug_reuse);
  u = miss;
  for (double* v : {&u.cpu_s, &u.source_bytes, &u.source_requests}) *v /= r;
  if (ssd) {
    u.ssd_write_bytes = s_f / r;
    u.ssd_read_bytes = s_f * (r - 1) / r;
  } else {
    u.copy_bytes += s_f / r;  // the store into RAM is one more memory copy
  }
  return u;
}

// Rates, throughput and the binding resource from the loads.
void finish(Prediction& pr) {
  double worst = 0;
  for (std::size_t r = 0; r < kResources; r++) {
    pr.load[r] = std::max(0.0, pr.load[r]);  // rounding must not make a usage negative
    pr.rate[r] = pr.load[r] > 0 ? 1.0 / pr.load[r] : kInf;
    if (pr.load[r] > worst) {
      worst = pr.load[r];
      pr.binding = static_cast<Resource>(r);
    }
  }
  pr.throughput = worst > 0 ? 1.0 / worst : kInf;
}

// Between a serve of a sample in one shuffled epoch and its serve in the next come the rest of the
// first epoch and the start of the next: U1 + U2 requests, each uniform on [0, n]. P(U1 + U2 <= t):
double two_epoch_gap_cdf(double t, double n) {
  if (t <= 0) return 0;
  if (t <= n) return t * t / (2 * n * n);
  if (t < 2 * n) return 1 - (2 * n - t) * (2 * n - t) / (2 * n * n);
  return 1;
}

// P(an entry put among the recent fills is still there when it is next wanted, gap_epochs epochs
// later): least recently used out, it survives while fewer than `room` bytes are put or touched
// after it, at `touched` bytes per request.
double survival(double gap_epochs, double touched, double room, double n) {
  if (touched <= 0) return 1;
  return two_epoch_gap_cdf(room / touched - (gap_epochs - 1) * n, n);
}

// The shares x(f,t) = n(f,t)/N of a placement (n > 0), and the share it leaves uncached.
struct Shares {
  const Placement& p;
  double n;
  double x(Form f, Tier t) const { return p.at(f, t) / n; }
  double miss() const { return std::max(0.0, 1 - p.total() / n); }
};

// Share of requests for samples the placement does not serve the view from: uncached, or cached in
// a form beyond the view (decoded/ and raw/ readers get nothing from variants, raw/ readers nothing
// from pixels).
double uncached_share(const Inputs& in, const Placement& p) {
  const double n = in.samples;
  double useless = 0;
  if (in.view != Form::augmented) useless += p.at(Form::augmented, Tier::ram) + p.at(Form::augmented, Tier::ssd);
  if (in.view == Form::raw) useless += p.at(Form::decoded, Tier::ram) + p.at(Form::decoded, Tier::ssd);
  return std::max(0.0, 1 - p.total() / n) + useless / n;
}

}  // namespace

double Placement::total() const {
  double s = 0;
  for (const auto& row : n)
    for (double v : row) s += v;
  return s;
}

double Placement::bytes(const Inputs& in, Tier t) const {
  double b = 0;
  for (Form f : kAllForms) b += at(f, t) * in.slot_size(f, t);
  return b;
}

bool feasible(const Inputs& in, const Placement& p, double tolerance) {
  for (const auto& row : p.n)
    for (double v : row)
      if (!(v >= 0)) return false;
  auto within = [&](double used, double cap) { return used <= cap + tolerance * std::max(1.0, cap); };
  return within(p.bytes(in, Tier::ram), in.ram_capacity) && within(p.bytes(in, Tier::ssd), in.ssd_capacity) &&
         within(p.total(), in.samples);
}

const char* resource_name(Resource r) {
  switch (r) {
    case Resource::kCpu: return "cpu";
    case Resource::kSsd: return "ssd";
    case Resource::kSourceBytes: return "source bandwidth";
    case Resource::kSourceRequests: return "source requests";
    case Resource::kCopy: return "copy";
    case Resource::kConsumer: return "consumer";
  }
  return "?";
}

LinearLoad linear_load(const Inputs& in) {
  LinearLoad ll;
  ll.usage_base = miss_usage(in);
  ll.base = loads(in, ll.usage_base, 1.0);
  for (Form f : kAllForms)
    for (Tier t : kAllTiers) {
      const std::size_t i = idx(f, t);
      ll.usage_coef[i] = minus(hit_usage(in, f, t), ll.usage_base);
      const auto l = loads(in, ll.usage_coef[i], 0.0);
      for (std::size_t r = 0; r < kResources; r++) ll.coef[r][i] = l[r];
    }
  ll.constrained[static_cast<std::size_t>(Resource::kCpu)] = in.cores > 0;
  ll.constrained[static_cast<std::size_t>(Resource::kSsd)] = in.ssd_read_bw > 0 || in.ssd_write_bw > 0;
  ll.constrained[static_cast<std::size_t>(Resource::kSourceBytes)] = in.src_bandwidth > 0;
  ll.constrained[static_cast<std::size_t>(Resource::kSourceRequests)] = in.src_request_rate() > 0;
  ll.constrained[static_cast<std::size_t>(Resource::kCopy)] = in.copy_bw > 0;
  ll.constrained[static_cast<std::size_t>(Resource::kConsumer)] = in.consumer_rate > 0;
  return ll;
}

Prediction predict(const Inputs& in, const Placement& p) {
  const LinearLoad ll = linear_load(in);
  Prediction pr;
  pr.usage = ll.usage_base;
  pr.load = ll.base;
  for (Form f : kAllForms)
    for (Tier t : kAllTiers) {
      const double x = in.samples > 0 ? p.at(f, t) / in.samples : 0.0;
      const std::size_t i = idx(f, t);
      add_scaled(pr.usage, ll.usage_coef[i], x);
      for (std::size_t r = 0; r < kResources; r++) pr.load[r] += ll.coef[r][i] * x;
    }
  finish(pr);
  return pr;
}

FreeRoom free_room(const Inputs& in, const Placement& p) {
  FreeRoom fr;
  const double n = in.samples;
  const double s_raw = in.size_of(Form::raw), s_dec = in.size_of(Form::decoded), s_aug = in.size_of(Form::augmented);
  const double r = std::max(1.0, in.aug_reuse);
  const bool aug_view = in.view == Form::augmented;
  // A variant in a tier (placed, or beside its pixels) is stored at its first serve and dropped at
  // its last: on average it is there R-1 of every R gaps between serves.
  const double variant_held = aug_view ? s_aug * (r - 1) / r : 0.0;
  const double occupied = p.at(Form::raw, Tier::ram) * s_raw +
                          p.at(Form::decoded, Tier::ram) * (s_dec + (in.variant_beside_pixels() ? variant_held : 0)) +
                          p.at(Form::augmented, Tier::ram) * variant_held;
  const double budget = in.ram_budget > 0 ? in.ram_budget : in.ram_capacity;
  fr.room = std::max(budget - occupied, in.recent_floor);
  if (n <= 0) return fr;
  const Shares sh{p, n};
  auto x = [&](Form f, Tier t) { return sh.x(f, t); };
  const double miss = sh.miss();
  auto settle = [](auto&& next) {  // the least fixed point, from 0 up: survival only grows
    double h = 0;
    for (int i = 0; i < 200; i++) {
      const double h_next = next(h);
      if (std::fabs(h_next - h) < 1e-12) return h_next;
      h = h_next;
    }
    return h;
  };

  if (aug_view) {
    // Samples whose variant no tier keeps: a variant is put among the recent fills at its first
    // serve (and again whenever a later serve had to render it), and a serve that finds it there
    // does not render. Their renders read raw bytes, which uncached samples fetch and keep there too
    // (and a sample's bytes read from the SSD; pixels read from the SSD for a render are not: the
    // renderer looks them up without keeping them, SampleStore::render_augmented).
    const double outside = miss + x(Form::raw, Tier::ram) + x(Form::raw, Tier::ssd) + x(Form::decoded, Tier::ssd);
    fr.outside = outside;
    // A placed variant's refill (one serve in R) fetches the bytes too, which wait there as well.
    const double placed_variants = x(Form::augmented, Tier::ram) + x(Form::augmented, Tier::ssd);
    auto touched = [&](double renders) {
      return outside * s_aug * (r - 1) / r + (miss + x(Form::raw, Tier::ssd)) * s_raw * renders +
             x(Form::augmented, Tier::ssd) * variant_held + placed_variants * s_raw / r;
    };
    auto renders = [&](double h) { return (1 + (r - 1) * (1 - h)) / r; };
    fr.variant_survival = r > 1 ? settle([&](double h) { return survival(1, touched(renders(h)), fr.room, n); }) : 0;
    fr.renders = renders(fr.variant_survival);
    fr.touched = touched(fr.renders);
    fr.raw_survival = survival(1 / fr.renders, fr.touched, fr.room, n);
    fr.refill_raw_survival = survival(r, fr.touched, fr.room, n);
    return fr;
  }
  const double uncached = uncached_share(in, p);
  if (in.view == Form::decoded) {
    // Pixels no tier keeps are among the recent fills after each serve; a decode reads raw bytes.
    const double outside = uncached + x(Form::raw, Tier::ram) + x(Form::raw, Tier::ssd);
    fr.outside = outside;
    auto touched = [&](double h) {
      return outside * s_dec + (uncached + x(Form::raw, Tier::ssd)) * s_raw * (1 - h) +
             x(Form::decoded, Tier::ssd) * s_dec;
    };
    fr.decoded_survival = settle([&](double h) { return survival(1, touched(h), fr.room, n); });
    fr.renders = 1 - fr.decoded_survival;
    fr.touched = touched(fr.decoded_survival);
    fr.raw_survival = fr.renders > 0 ? survival(1 / fr.renders, fr.touched, fr.room, n) : 1;
    return fr;
  }
  fr.outside = uncached;
  fr.touched = (uncached + x(Form::raw, Tier::ssd)) * s_raw;
  fr.raw_survival = survival(1, fr.touched, fr.room, n);
  return fr;
}

Prediction predict_with_free_room(const Inputs& in, const Placement& p) {
  return predict_with_free_room(in, p, free_room(in, p));
}

Prediction predict_with_free_room(const Inputs& in, const Placement& p, const FreeRoom& fr) {
  Prediction pr = predict(in, p);
  const double n = in.samples;
  if (n <= 0) return pr;
  const Shares sh{p, n};
  auto x = [&](Form f, Tier t) { return sh.x(f, t); };
  const double miss = sh.miss();
  const double s_raw = in.size_of(Form::raw), s_dec = in.size_of(Form::decoded);
  Usage& u = pr.usage;
  // An uncached sample fetches once per render whose bytes are no longer among the recent fills.
  auto fetch_less = [&](double uncached, double fetches) {
    u.source_bytes -= uncached * s_raw * (1 - fetches);
    u.source_requests -= uncached * (1 - fetches);
  };
  if (in.view == Form::augmented) {
    const double saved = 1 - fr.renders;
    const double x_raw = x(Form::raw, Tier::ram) + x(Form::raw, Tier::ssd);
    u.cpu_s -= (miss + x_raw) * (in.c_dec + in.c_aug) * saved +
               x(Form::decoded, Tier::ssd) * in.c_aug_from_decoded * saved;
    u.ssd_read_bytes -= (x(Form::raw, Tier::ssd) * s_raw + x(Form::decoded, Tier::ssd) * s_dec) * saved;
    fetch_less(miss, fr.renders * (1 - fr.raw_survival));
    const double refills =
        (x(Form::augmented, Tier::ram) + x(Form::augmented, Tier::ssd)) / std::max(1.0, in.aug_reuse);
    fetch_less(refills, 1 - fr.refill_raw_survival);
  } else {
    const double uncached = uncached_share(in, p);
    if (in.view == Form::decoded) {
      const double h = fr.decoded_survival;
      u.cpu_s -= (uncached + x(Form::raw, Tier::ram) + x(Form::raw, Tier::ssd)) * in.c_dec * h;
      u.ssd_read_bytes -= x(Form::raw, Tier::ssd) * s_raw * h;
      fetch_less(uncached, (1 - h) * (1 - fr.raw_survival));
    } else {
      fetch_less(uncached, 1 - fr.raw_survival);
    }
  }
  for (double* v : {&u.cpu_s, &u.ssd_read_bytes, &u.source_bytes, &u.source_requests}) *v = std::max(0.0, *v);
  pr.load = loads(in, u, 1.0);
  finish(pr);
  return pr;
}

}  // namespace prepfs::model

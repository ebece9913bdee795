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
  return pr;
}

}  // namespace prepfs::model

// The exact planner: a linear program in the fractions x(f,t) = n(f,t)/N and the epigraph
// variable t, solved by enumerating the vertices of its feasible polyhedron (docs/MODEL.md).
#include "prepfs/model/solver.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

namespace prepfs::model {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kX = kForms * kTiers;  // 6 placement variables
constexpr std::size_t kVars = kX + 1;        // plus tau

std::size_t idx(Form f, Tier t) { return static_cast<std::size_t>(f) * kTiers + static_cast<std::size_t>(t); }

struct Row {
  std::array<double, kVars> a{};
  double b = 0;
};

// Solves the square system rows[sel] z = b by Gaussian elimination with partial pivoting.
// False when singular.
bool solve_square(const std::vector<Row>& rows, const std::array<std::size_t, kVars>& sel,
                  std::array<double, kVars>& z) {
  std::array<std::array<double, kVars + 1>, kVars> m{};
  for (std::size_t i = 0; i < kVars; i++) {
    for (std::size_t j = 0; j < kVars; j++) m[i][j] = rows[sel[i]].a[j];
    m[i][kVars] = rows[sel[i]].b;
  }
  for (std::size_t c = 0; c < kVars; c++) {
    std::size_t p = c;
    for (std::size_t i = c + 1; i < kVars; i++)
      if (std::fabs(m[i][c]) > std::fabs(m[p][c])) p = i;
    if (std::fabs(m[p][c]) < 1e-12) return false;
    std::swap(m[p], m[c]);
    for (std::size_t i = 0; i < kVars; i++) {
      if (i == c || m[i][c] == 0) continue;
      const double k = m[i][c] / m[c][c];
      for (std::size_t j = c; j <= kVars; j++) m[i][j] -= k * m[c][j];
    }
  }
  for (std::size_t i = 0; i < kVars; i++) z[i] = m[i][kVars] / m[i][i];
  return true;
}

void push_row(std::vector<Row>& rows, Row r) {
  double scale = 0;
  for (double v : r.a) scale = std::max(scale, std::fabs(v));
  if (scale == 0) return;  // 0 <= b: always true for the rows built below
  for (double& v : r.a) v /= scale;
  r.b /= scale;
  rows.push_back(r);
}

Placement from_fractions(const Inputs& in, const std::array<double, kVars>& z) {
  Placement p;
  for (Form f : kAllForms)
    for (Tier t : kAllTiers) p.at(f, t) = std::clamp(z[idx(f, t)], 0.0, 1.0) * in.samples;
  return p;
}

std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string human(double v, const char* unit) {
  if (std::isinf(v)) return "unlimited";
  const bool bytes = unit[0] == 'B';
  if (bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (std::fabs(v) >= 1024 && u < 4) {
      v /= 1024;
      u++;
    }
    return printf_string("%.4g %s%s", v, units[u], unit + 1);
  }
  return printf_string("%.4g%s%s", v, unit[0] ? " " : "", unit);
}

std::string rate(double samples_per_s) {
  return std::isinf(samples_per_s) ? "unlimited" : printf_string("%.1f samples/s", samples_per_s);
}

// One sample of the LP's optimum can matter when a miss is costly and N small, so the rounded
// placement is improved by moves of one sample (add one, or move one between two (form, tier)
// cells) while that raises the predicted throughput.
Placement improve_integer(const Inputs& in, Placement p) {
  const LinearLoad ll = linear_load(in);
  auto throughput = [&](const Placement& q) {
    double worst = 0;
    for (std::size_t r = 0; r < kResources; r++) {
      if (!ll.constrained[r]) continue;
      double l = ll.base[r];
      for (std::size_t i = 0; i < kX; i++) l += ll.coef[r][i] * q.n[i / kTiers][i % kTiers] / in.samples;
      worst = std::max(worst, l);
    }
    return worst > 0 ? 1 / worst : kInf;
  };
  if (in.samples <= 0) return p;
  double best = throughput(p);
  for (int round = 0; round < 10000 && !std::isinf(best); round++) {
    Placement best_q = p;
    double best_v = best;
    for (std::size_t i = 0; i < kX; i++)
      for (std::size_t j = 0; j <= kX; j++) {  // j == kX: no sample taken away
        if (i == j) continue;
        Placement q = p;
        q.n[i / kTiers][i % kTiers] += 1;
        if (j < kX) {
          if (q.n[j / kTiers][j % kTiers] < 1) continue;
          q.n[j / kTiers][j % kTiers] -= 1;
        }
        if (!feasible(in, q, 0.0)) continue;
        const double v = throughput(q);
        if (v > best_v * (1 + 1e-12)) best_v = v, best_q = q;
      }
    if (best_v <= best * (1 + 1e-12)) break;
    p = best_q;
    best = best_v;
  }
  return p;
}

}  // namespace

Placement single_form(const Inputs& in, Form f) {
  Placement p;
  const double s_ram = in.slot_size(f, Tier::ram), s_ssd = in.slot_size(f, Tier::ssd);
  if (s_ram <= 0 || in.samples <= 0) return p;
  const double ram = std::min(in.samples, std::floor(in.ram_capacity / s_ram));
  const double ssd = std::min(in.samples - ram, std::floor(in.ssd_capacity / s_ssd));
  p.at(f, Tier::ram) = std::max(0.0, ram);
  p.at(f, Tier::ssd) = std::max(0.0, ssd);
  return p;
}

Placement fixed_placement(const Inputs& in, const std::array<std::array<double, kForms>, kTiers>& shares) {
  Placement p;
  double left = std::max(0.0, in.samples);
  for (Tier t : kAllTiers) {
    const double budget = t == Tier::ram ? in.ram_capacity : in.ssd_capacity;
    for (Form f : kAllForms) {
      const double s = in.slot_size(f, t), share = shares[static_cast<std::size_t>(t)][static_cast<std::size_t>(f)];
      if (s <= 0 || share <= 0) continue;
      const double n = std::min(left, std::floor(std::max(0.0, share * budget) / s));
      p.at(f, t) = n;
      left -= n;
    }
  }
  return p;
}

Placement solve_continuous(const Inputs& in) {
  if (in.samples <= 0) return {};
  const LinearLoad ll = linear_load(in);

  // t = tau * tref keeps tau of order 1 whatever the units.
  double tref = 0;
  for (std::size_t r = 0; r < kResources; r++) {
    if (!ll.constrained[r]) continue;
    double l = std::fabs(ll.base[r]);
    for (double c : ll.coef[r]) l += std::fabs(c);
    tref = std::max(tref, l);
  }
  if (tref == 0) return {};  // nothing is constrained: every placement is as fast; cache nothing

  std::vector<Row> rows;
  for (std::size_t i = 0; i < kX; i++) {  // x >= 0
    Row r;
    r.a[i] = -1;
    push_row(rows, r);
  }
  for (Tier t : kAllTiers) {  // sum_f x(f,t) S_f N <= capacity
    Row r;
    for (Form f : kAllForms) r.a[idx(f, t)] = in.slot_size(f, t) * in.samples;
    r.b = std::max(0.0, t == Tier::ram ? in.ram_capacity : in.ssd_capacity);
    push_row(rows, r);
  }
  {  // sum x <= 1: each sample in at most one (form, tier)
    Row r;
    for (std::size_t i = 0; i < kX; i++) r.a[i] = 1;
    r.b = 1;
    push_row(rows, r);
  }
  for (std::size_t res = 0; res < kResources; res++) {  // load_r(x) <= tau * tref
    if (!ll.constrained[res]) continue;
    Row r;
    for (std::size_t i = 0; i < kX; i++) r.a[i] = ll.coef[res][i];
    r.a[kX] = -tref;
    r.b = -ll.base[res];
    push_row(rows, r);
  }
  {  // tau >= 0, so the polyhedron is pointed and the optimum is a vertex
    Row r;
    r.a[kX] = -1;
    push_row(rows, r);
  }

  // Every vertex: kVars linearly independent rows active, all rows satisfied.
  const std::size_t m = rows.size();
  std::vector<std::array<double, kVars>> vertices;
  for (std::uint32_t mask = 0; mask < (1u << m); mask++) {
    if (std::popcount(mask) != static_cast<int>(kVars)) continue;
    std::array<std::size_t, kVars> sel{};
    std::size_t k = 0;
    for (std::size_t i = 0; i < m; i++)
      if (mask & (1u << i)) sel[k++] = i;
    std::array<double, kVars> z{};
    if (!solve_square(rows, sel, z)) continue;
    bool ok = true;
    for (const Row& r : rows) {
      double lhs = 0;
      for (std::size_t j = 0; j < kVars; j++) lhs += r.a[j] * z[j];
      if (lhs > r.b + 1e-9 * std::max(1.0, std::fabs(r.b))) {
        ok = false;
        break;
      }
    }
    if (ok) vertices.push_back(z);
  }
  if (vertices.empty()) return {};  // cannot happen: x = 0 with a large tau is feasible

  double best_tau = kInf;
  for (const auto& z : vertices) best_tau = std::min(best_tau, z[kX]);
  // Among the optimal vertices: fewest SSD bytes, then fewest RAM bytes.
  const std::array<double, kVars>* best = nullptr;
  double best_ssd = kInf, best_ram = kInf;
  for (const auto& z : vertices) {
    if (z[kX] > best_tau + 1e-9 * std::max(1.0, best_tau)) continue;
    const Placement p = from_fractions(in, z);
    const double ssd = p.bytes(in, Tier::ssd), ram = p.bytes(in, Tier::ram);
    const double ssd_tol = 1e-9 * std::max(1.0, in.ssd_capacity), ram_tol = 1e-9 * std::max(1.0, in.ram_capacity);
    if (best == nullptr || ssd < best_ssd - ssd_tol || (ssd <= best_ssd + ssd_tol && ram < best_ram - ram_tol)) {
      best = &z;
      best_ssd = ssd;
      best_ram = ram;
    }
  }
  return from_fractions(in, *best);
}

Plan solve(const Inputs& in) {
  Plan plan;
  plan.alternatives[0] = {"no cache", Placement{}, predict(in, Placement{})};
  plan.alternatives[1] = {"all raw", single_form(in, Form::raw), {}};
  plan.alternatives[2] = {"all decoded", single_form(in, Form::decoded), {}};
  plan.alternatives[3] = {"all augmented", single_form(in, Form::augmented), {}};
  for (std::size_t i = 1; i < plan.alternatives.size(); i++)
    plan.alternatives[i].prediction = predict(in, plan.alternatives[i].placement);

  const Placement cont = solve_continuous(in);
  plan.lp_throughput = predict(in, cont).throughput;

  // Round down to whole samples (that keeps every budget; the epsilon absorbs floating-point
  // noise and the loop undoes any overshoot it causes), then improve by local search.
  Placement p;
  for (Form f : kAllForms)
    for (Tier t : kAllTiers) p.at(f, t) = std::max(0.0, std::floor(cont.at(f, t) + 1e-6));
  // The repair takes one sample at a time off a cell of a budget that is over (a tier's bytes,
  // or the sample count), the cells the epsilon rounded up first: taking them off any large
  // cell, wherever it was, emptied the other tier before the overshooting one gave way.
  while (!feasible(in, p, 0.0)) {
    const bool ram_over = p.bytes(in, Tier::ram) > in.ram_capacity;
    const bool ssd_over = p.bytes(in, Tier::ssd) > in.ssd_capacity;
    const bool count_over = p.total() > in.samples;
    double* pick = nullptr;
    bool pick_rounded_up = false;
    for (Form f : kAllForms)
      for (Tier t : kAllTiers) {
        double& v = p.at(f, t);
        const bool tier_over = t == Tier::ram ? ram_over : ssd_over;
        if (v <= 0 || !(count_over || (tier_over && in.slot_size(f, t) > 0))) continue;
        const bool rounded_up = v > cont.at(f, t);
        if (!pick || (rounded_up && !pick_rounded_up) || (rounded_up == pick_rounded_up && v > *pick)) {
          pick = &v;
          pick_rounded_up = rounded_up;
        }
      }
    if (!pick) break;
    *pick -= 1;
  }
  p = improve_integer(in, p);
  const Prediction none = plan.alternatives[0].prediction;
  plan.caching_helps = predict(in, p).throughput > none.throughput * (1 + 1e-9);
  if (!plan.caching_helps) p = Placement{};
  plan.placement = p;
  plan.prediction = predict(in, p);
  return plan;
}

namespace {

// What the recent fills keep of the fills no tier keeps, for explain().
std::string kept_in_free_room(const Inputs& in, const FreeRoom& fr) {
  if (in.samples <= 0) return "";
  if (fr.outside <= 1e-12)  // a share computed as 1 - n/N may round just above 0
    return "  no sample needs them: the tiers keep every sample in a form its view is served from\n";
  if (in.view == Form::augmented)
    return printf_string(
        "  keep %.0f%% of the variants no tier keeps until their next serve, %.0f%% of the bytes "
        "until their next render\n",
        fr.variant_survival * 100, fr.raw_survival * 100);
  if (in.view == Form::decoded)
    return printf_string(
        "  keep %.0f%% of the pixels no tier keeps until their next serve, %.0f%% of the bytes "
        "until their next decode\n",
        fr.decoded_survival * 100, fr.raw_survival * 100);
  return printf_string("  keep %.0f%% of the bytes no tier keeps until their next serve\n", fr.raw_survival * 100);
}

}  // namespace

std::string explain(const Inputs& in, const Plan& plan) {
  std::string s;
  s += printf_string("view: %s/, aug_reuse %g\n", form_name(in.view), in.aug_reuse);
  s += "measured inputs:\n";
  for (const NamedInput& n : named_inputs(in)) {
    // c_aug is a difference of two costs (0 or below when crop decode makes a variant from the JPEG
    // cost no more than a decode), never a resource left unconstrained.
    const std::string name = n.name;
    const bool unmeasured = n.value == 0 && n.unit[0] && name.find("capacity") == std::string::npos &&
                            name != "c_aug" && name != "recent_floor";
    s += printf_string("  %-20s %s\n", n.name, unmeasured ? "unknown (unconstrained)" : human(n.value, n.unit).c_str());
  }
  s += printf_string("placement (samples of %.0f):\n  %-10s %14s %14s\n", in.samples, "form", "ram", "ssd");
  for (Form f : kAllForms)
    s += printf_string("  %-10s %14.0f %14.0f\n", form_name(f), plan.placement.at(f, Tier::ram),
                       plan.placement.at(f, Tier::ssd));
  s += printf_string("  %-10s %14.0f\n", "uncached", std::max(0.0, in.samples - plan.placement.total()));
  s += printf_string("  ram used %s of %s, ssd used %s of %s\n",
                     human(plan.placement.bytes(in, Tier::ram), "B").c_str(), human(in.ram_capacity, "B").c_str(),
                     human(plan.placement.bytes(in, Tier::ssd), "B").c_str(), human(in.ssd_capacity, "B").c_str());
  // What to expect counts the recent fills in the RAM the placement leaves free; the planner
  // compares placements alone (MODEL.md, "The free room"), and so do the lines after these.
  const FreeRoom fr = free_room(in, plan.placement);
  const Prediction expected = predict_with_free_room(in, plan.placement, fr);
  s += printf_string("predicted throughput: %s, bound by %s\n", rate(expected.throughput).c_str(),
                     resource_name(expected.binding));
  s += "  per resource:";
  for (std::size_t r = 0; r < kResources; r++)
    s += printf_string(" %s %s;", resource_name(static_cast<Resource>(r)), rate(expected.rate[r]).c_str());
  const Prediction& pr = plan.prediction;
  s += printf_string("\n  the placement alone: %s, bound by %s; the recent fills in the %s of RAM it leaves free\n",
                     rate(pr.throughput).c_str(), resource_name(pr.binding), human(fr.room, "B").c_str());
  s += kept_in_free_room(in, fr);
  s += "single-form alternatives (placements alone):\n";
  for (const Alternative& a : plan.alternatives)
    s += printf_string("  %-14s %s, bound by %s\n", a.name, rate(a.prediction.throughput).c_str(),
                       resource_name(a.prediction.binding));

  const Prediction& none = plan.alternatives[0].prediction;
  if (!plan.caching_helps) {
    if (none.binding == Resource::kConsumer)
      s += "verdict: caching cannot help: the source already keeps up with the consumer; nothing is cached, no SSD "
           "write is spent\n";
    else
      s += printf_string(
          "verdict: caching cannot help: with no cache the binding resource is %s, and no placement uses less of it; "
          "nothing is cached, no SSD write is spent\n",
          resource_name(none.binding));
  } else {
    s += printf_string("verdict: caching raises throughput %.2fx over no cache", pr.throughput / none.throughput);
    const Alternative* best_single = &plan.alternatives[1];
    for (std::size_t i = 2; i < plan.alternatives.size(); i++)
      if (plan.alternatives[i].prediction.throughput > best_single->prediction.throughput)
        best_single = &plan.alternatives[i];
    s += printf_string(", %.2fx over the best single form (%s)\n", pr.throughput / best_single->prediction.throughput,
                       best_single->name);
  }
  if (in.view == Form::augmented && in.aug_reuse <= 1)
    s +=
        "note: aug_reuse 1: every augmented variant is regenerated for each read, so caching augmented saves nothing\n";
  if (in.view != Form::augmented)
    s += printf_string("note: the consumer reads %s/, so forms derived beyond it are never served\n",
                       form_name(in.view));
  return s;
}

}  // namespace prepfs::model

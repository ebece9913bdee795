#include "prepfs/core/job_files.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "prepfs/common/error.h"

namespace prepfs {
namespace {

bool valid_job_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// Splits what arrives into whole lines, keeping a partial last line for the next write.
//
// A write is checked whole before any of its lines is applied: a bad line (or a line over 64 KiB)
// fails the write with EINVAL and nothing of it applied, so a writer that sees the error knows
// what took effect (everything its earlier writes said). It also ends the handle: later writes
// fail at once (open the file again). Kept, the handle's lines would be parsed again with the
// next write, and the buffer would grow with every write.
class LineSession : public ControlFs::WriteSession {
 public:
  void write(std::string_view data) override {
    if (failed_) throw Error(EINVAL, std::string(what()) + ": an earlier write on this handle failed; open it again");
    try {
      partial_.append(data.data(), data.size());
      size_t start = 0;
      for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
        check(trim(std::string_view(partial_).substr(start, nl - start)));
      if (partial_.size() - start > kMaxLine) throw Error(EINVAL, "a line over 64 KiB: not a path");
      start = 0;
      for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
        line(trim(std::string_view(partial_).substr(start, nl - start)));
      partial_.erase(0, start);
      // A large write leaves its capacity behind; handles are many (any user may open one).
      if (partial_.capacity() > 2 * kMaxLine) partial_.shrink_to_fit();
      flush();
    } catch (...) {
      failed_ = true;
      std::string().swap(partial_);
      discard();
      throw;
    }
  }
  void close() override {
    if (failed_) return;  // its error went to the write that failed
    try {
      if (!trim(partial_).empty()) {
        check(trim(partial_));
        line(trim(partial_));
      }
      partial_.clear();
      flush();
    } catch (const std::exception& e) {
      spdlog::warn("{}: {}", what(), e.what());
    }
  }

 protected:
  virtual void check(std::string_view l) const = 0;  // throws Error(EINVAL) for a line line() would refuse
  virtual void line(std::string_view l) = 0;          // applies a checked line
  virtual void flush() = 0;  // after each write: apply what the lines gathered
  virtual void discard() {}  // a write failed: what the lines gathered is not applied
  virtual const char* what() const = 0;

  // Unknown names are skipped; the first one is logged, the total at close.
  void unknown(std::string_view l) {
    if (unknown_++ == 0)
      spdlog::warn("{}: skipping '{}': no such sample in any view (further ones counted)", what(), l);
  }
  uint64_t unknown_ = 0;

 private:
  static constexpr size_t kMaxLine = 64u << 10;  // a line is a path (PATH_MAX 4096) and a view
  std::string partial_;
  bool failed_ = false;
};

class OrderSession final : public LineSession {
 public:
  OrderSession(JobKnowledge& k, const ViewPaths& p, std::function<void()> published, std::string owner)
      : knowledge_(k), paths_(p), published_(std::move(published)), owner_(std::move(owner)) {}
  ~OrderSession() override {
    if (unknown_ > 1) spdlog::warn("order of job {}: {} paths skipped (no such sample)", job_, unknown_);
  }

 protected:
  const char* what() const override { return "order"; }

  static bool is_job_line(std::string_view l) { return l.starts_with("job ") || l == "job"; }
  // A `job NAME [opportunistic]` line's name, and whether it says opportunistic.
  static std::pair<std::string_view, bool> parse_job_line(std::string_view l) {
    std::string_view name = trim(l.substr(3));
    bool opportunistic = false;
    if (const size_t sp = name.find(' '); sp != std::string_view::npos) {
      if (trim(name.substr(sp + 1)) != "opportunistic")
        throw Error(EINVAL, "order: '" + std::string(l) + "': expected 'job NAME' or 'job NAME opportunistic'");
      opportunistic = true;
      name = name.substr(0, sp);
    }
    if (!valid_job_name(name))
      throw Error(EINVAL, "order: job name '" + std::string(name) + "' must be 1-64 of [A-Za-z0-9_.-]");
    return {name, opportunistic};
  }

  void check(std::string_view l) const override {
    if (is_job_line(l)) parse_job_line(l);
  }

  void line(std::string_view l) override {
    if (l.empty() || l[0] == '#') return;
    if (is_job_line(l)) {
      flush();
      const auto [name, opportunistic] = parse_job_line(l);
      job_ = std::string(name) + owner_;
      knowledge_.set_opportunistic(job_, opportunistic);
    } else if (l == "reset") {
      flush();
      knowledge_.reset(job_);
    } else if (l == "end") {
      flush();
      knowledge_.end(job_);
    } else if (auto t = paths_.resolve(l)) {
      batch_.push_back(Access{t->node, t->form});
      if (batch_.size() >= kBatch) flush();  // a write of millions of lines holds one batch at a time
    } else {
      unknown(l);
    }
  }

  void discard() override { batch_.clear(); }
  void flush() override {
    if (batch_.empty()) return;
    knowledge_.publish(job_, batch_);
    batch_.clear();
    if (published_) published_();
  }

 private:
  static constexpr size_t kBatch = 65536;
  JobKnowledge& knowledge_;
  const ViewPaths& paths_;
  std::function<void()> published_;
  const std::string owner_;  // appended to each job name: empty, or "@UID" (see job_files.h)
  std::string job_ = "default" + owner_;
  std::vector<Access> batch_;
};

class ImportanceSession final : public LineSession {
 public:
  ImportanceSession(JobKnowledge& k, const SampleList& s, const ViewPaths& p) : knowledge_(k), samples_(s), paths_(p) {}

 protected:
  const char* what() const override { return "importance"; }

  // A line's value, with its sample's name or index before it; nullopt for a line with no value
  // (skipped as naming nothing).
  static std::optional<std::pair<std::string_view, double>> parse(std::string_view l) {
    const size_t sp = l.find_last_of(" \t");
    if (sp == std::string_view::npos) return std::nullopt;
    const std::string value_text(trim(l.substr(sp + 1)));
    char* end = nullptr;
    const double value = std::strtod(value_text.c_str(), &end);  // accepts 1e-05
    // Kept as a float: a larger value would not convert (undefined behaviour).
    if (end == value_text.c_str() || *end != '\0' || !std::isfinite(value) || value < 0 ||
        value > std::numeric_limits<float>::max())
      throw Error(EINVAL, "importance: '" + std::string(l) + "': the value must be a number from 0 to 3.4e38");
    return std::pair{trim(l.substr(0, sp)), value};
  }

  void check(std::string_view l) const override {
    if (!l.empty() && l[0] != '#') parse(l);
  }

  void line(std::string_view l) override {
    if (l.empty() || l[0] == '#') return;
    const auto parsed = parse(l);
    if (!parsed) return unknown(l);
    const auto [who, value] = *parsed;
    uint32_t index = 0;
    auto [ptr, ec] = std::from_chars(who.data(), who.data() + who.size(), index);
    if (ec == std::errc() && ptr == who.data() + who.size()) {
      if (index >= samples_.size()) return unknown(l);
      knowledge_.set_importance(samples_.node(index), value);
    } else if (auto t = paths_.resolve(who)) {
      knowledge_.set_importance(t->node, value);
    } else {
      return unknown(l);
    }
    changed_ = true;
  }

  void discard() override { flush(); }  // a checked write failed midway (out of memory): re-rank for what is in
  void flush() override {
    if (changed_) knowledge_.bump_generation();  // the importance policy re-ranks once per write
    changed_ = false;
  }

 private:
  JobKnowledge& knowledge_;
  const SampleList& samples_;
  const ViewPaths& paths_;
  bool changed_ = false;
};

}  // namespace

std::string render_samples(const SampleList& samples, const Tree& tree, const ViewPaths& paths) {
  std::string out;
  out.reserve(samples.size() * 64);
  for (size_t i = 0; i < samples.size(); i++) {
    const uint32_t node = samples.node(i);
    out += tree.path(node);
    out += '\t';
    // "-" (never an image path: no view name ends so) for a sample the image views do not show:
    // its name there was another file's ("x.jpg" and "x.JPEG"), or none at all.
    out += paths.image_path(node).value_or("-");
    out += '\n';
  }
  return out;
}

std::string render_resident(const SampleList& samples, const SampleResidency& residency) {
  std::string bits((samples.size() + 7) / 8, '\0');
  for (size_t i = 0; i < samples.size(); i++)
    if (residency.resident(samples.node(i))) bits[i / 8] = static_cast<char>(bits[i / 8] | (1 << (i % 8)));
  return bits;
}

std::unique_ptr<ControlFs::WriteSession> open_order_session(JobKnowledge& knowledge, const ViewPaths& paths,
                                                            std::function<void()> published, std::string owner) {
  return std::make_unique<OrderSession>(knowledge, paths, std::move(published), std::move(owner));
}

std::unique_ptr<ControlFs::WriteSession> open_importance_session(JobKnowledge& knowledge, const SampleList& samples,
                                                                 const ViewPaths& paths) {
  return std::make_unique<ImportanceSession>(knowledge, samples, paths);
}

}  // namespace prepfs

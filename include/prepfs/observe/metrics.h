// Prometheus text exposition (format 0.0.4) of the daemon's counters: .prepfs/metrics and the
// optional HTTP endpoint (-o metrics_addr=) serve the same text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "prepfs/common/stats.h"
#include "prepfs/observe/stats_json.h"

namespace prepfs {

// Writes well-formed exposition text: one HELP and TYPE line per family, then its samples.
// Label values are escaped; names are the caller's (constants, checked by the unit tests).
class PromText {
 public:
  using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;
  // type: counter | gauge | histogram. A counter's name ends in _total.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, Labels labels, double value);
  void sample(std::string_view name, Labels labels, uint64_t value);
  // A whole histogram family of seconds from a nanosecond histogram.
  void histogram_seconds(std::string_view name, std::string_view help, const LatencyHistogram& h);
  const std::string& str() const { return out_; }

 private:
  void labels(Labels l);
  std::string out_;
};

std::string escape_label_value(std::string_view v);

// Everything the daemon counts, as Prometheus text.
std::string render_metrics(const StatsSources& s);

}  // namespace prepfs

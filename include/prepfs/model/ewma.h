// Exponentially weighted moving average, for the profiler's online measurements.
#pragma once

#include <cmath>

namespace prepfs::model {

class Ewma {
 public:
  // alpha in (0, 1]: the weight of each new observation.
  explicit Ewma(double alpha = 0.1) : alpha_(alpha) {}

  // The first observation is taken as is; later ones move the value by alpha of the difference.
  void update(double x) {
    if (!has_value_) {
      value_ = x;
      has_value_ = true;
    } else {
      value_ += alpha_ * (x - value_);
    }
  }
  // The mean of n observations at once, weighted as n single updates would weigh them: a window
  // of many samples moves the value far, a window of few barely (the weight is per sample, not
  // per window, so idle or sparse windows cannot hold an old estimate in place or jerk it).
  void update_mean(double mean, double n) {
    if (n <= 0) return;
    if (!has_value_) {
      value_ = mean;
      has_value_ = true;
    } else {
      value_ += (1 - std::pow(1 - alpha_, n)) * (mean - value_);
    }
  }
  double value() const { return value_; }
  bool has_value() const { return has_value_; }
  double alpha() const { return alpha_; }
  void reset() {
    value_ = 0;
    has_value_ = false;
  }

 private:
  double alpha_;
  double value_ = 0;
  bool has_value_ = false;
};

}  // namespace prepfs::model

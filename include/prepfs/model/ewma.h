// Exponentially weighted moving average, for the profiler's online measurements.
#pragma once

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

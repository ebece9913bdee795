// Recursive-descent parser for the pipeline spec grammar documented in pipeline_spec.h.
#include "prepfs/transform/pipeline_spec.h"

#include "prepfs/transform/error.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

#include <xxhash.h>

namespace prepfs::transform {
namespace {

struct Arg {
  std::size_t pos = 0;
  double value = 0;      // numeric value (for a size: H)
  bool is_int = false;   // an integer literal without fraction or exponent
  std::optional<int> w;  // set for HxW
};

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  std::vector<Op> parse() {
    std::vector<Op> ops;
    skip_ws();
    if (at_end()) throw SpecError(i_, "empty pipeline spec");
    for (;;) {
      ops.push_back(op());
      skip_ws();
      if (at_end()) break;
      expect(';');
      skip_ws();
      if (at_end()) break;  // one trailing ';' is fine
    }
    return ops;
  }

 private:
  std::string_view t_;
  std::size_t i_ = 0;

  bool at_end() const { return i_ >= t_.size(); }
  void skip_ws() {
    while (!at_end() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (at_end() || t_[i_] != c) {
      throw SpecError(i_, std::string("expected '") + c + "'" + (at_end() ? " but the spec ended" : ""));
    }
    ++i_;
  }

  std::string name() {
    const std::size_t b = i_;
    while (!at_end() && ((t_[i_] >= 'a' && t_[i_] <= 'z') || t_[i_] == '_')) ++i_;
    if (b == i_) throw SpecError(i_, "expected an op name (rrc, resize, center_crop, hflip)");
    return std::string(t_.substr(b, i_ - b));
  }

  // decimal := digits [. digits] [e [+-] digits]
  double decimal(bool& is_int) {
    const std::size_t b = i_;
    is_int = true;
    while (!at_end() &&
           (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E' ||
            ((t_[i_] == '+' || t_[i_] == '-') && i_ > b && (t_[i_ - 1] == 'e' || t_[i_ - 1] == 'E')))) {
      if (!std::isdigit(static_cast<unsigned char>(t_[i_]))) is_int = false;
      ++i_;
    }
    double v = 0;
    const char* first = t_.data() + b;
    const char* last = t_.data() + i_;
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (b == i_ || ec != std::errc() || ptr != last || !std::isfinite(v)) {
      throw SpecError(b, "expected a number");
    }
    return v;
  }

  Arg arg() {
    skip_ws();
    Arg a;
    a.pos = i_;
    bool int1 = false;
    a.value = decimal(int1);
    a.is_int = int1;
    if (!at_end() && t_[i_] == '/') {
      ++i_;
      bool int2 = false;
      const std::size_t dpos = i_;
      const double d = decimal(int2);
      if (d == 0) throw SpecError(dpos, "division by zero");
      a.value /= d;
      if (!std::isfinite(a.value)) throw SpecError(a.pos, "the quotient is out of range");
      a.is_int = false;
    } else if (!at_end() && t_[i_] == 'x') {
      ++i_;
      bool int2 = false;
      const std::size_t wpos = i_;
      const double w = decimal(int2);
      if (!int1 || !int2) throw SpecError(a.pos, "a size HxW needs two integers");
      a.w = check_side(w, wpos);
    }
    skip_ws();
    return a;
  }

  static int check_side(double v, std::size_t pos) {
    if (v < 1 || v > kMaxSpecSide) {
      throw SpecError(pos, "size must be between 1 and " + std::to_string(kMaxSpecSide));
    }
    return static_cast<int>(v);
  }

  static Size size_of(const Arg& a) {
    if (!a.is_int && !a.w) throw SpecError(a.pos, "expected a size (N or HxW)");
    const int h = check_side(a.value, a.pos);
    return Size{a.w ? *a.w : h, h};
  }

  static double number_of(const Arg& a) {
    if (a.w) throw SpecError(a.pos, "expected a number, not a size");
    return a.value;
  }

  std::vector<Arg> args() {
    expect('(');
    std::vector<Arg> out;
    skip_ws();
    if (!at_end() && t_[i_] == ')') {
      ++i_;
      return out;
    }
    for (;;) {
      out.push_back(arg());
      if (!at_end() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      expect(')');
      return out;
    }
  }

  Op op() {
    const std::size_t pos = i_;
    const std::string n = name();
    const std::vector<Arg> a = args();
    const auto arity = [&](std::initializer_list<std::size_t> ok) {
      for (std::size_t k : ok) {
        if (a.size() == k) return;
      }
      throw SpecError(pos, n + "(): wrong number of arguments");
    };
    if (n == "rrc") {
      arity({1, 3, 5});
      RrcOp r;
      r.size = size_of(a[0]);
      if (a.size() >= 3) {
        r.params.scale_lo = number_of(a[1]);
        r.params.scale_hi = number_of(a[2]);
        if (!(r.params.scale_lo > 0 && r.params.scale_lo <= r.params.scale_hi && r.params.scale_hi <= 1)) {
          throw SpecError(a[1].pos, "rrc(): need 0 < scale_lo <= scale_hi <= 1");
        }
      }
      if (a.size() == 5) {
        r.params.ratio_lo = number_of(a[3]);
        r.params.ratio_hi = number_of(a[4]);
        // Bounded so that every ratio the sampler draws is a float (and, past 1e6, no crop of any
        // image of at most 65535 pixels a side could have it anyway).
        if (!(r.params.ratio_lo >= 1e-6 && r.params.ratio_lo <= r.params.ratio_hi && r.params.ratio_hi <= 1e6)) {
          throw SpecError(a[3].pos, "rrc(): need 1e-6 <= ratio_lo <= ratio_hi <= 1e6");
        }
      }
      return r;
    }
    if (n == "resize") {
      arity({1});
      ResizeOp r;
      if (a[0].w) {
        r.size = size_of(a[0]);
      } else {
        if (!a[0].is_int) throw SpecError(a[0].pos, "resize(): expected N or HxW");
        r.shorter = check_side(a[0].value, a[0].pos);
      }
      return r;
    }
    if (n == "center_crop") {
      arity({1});
      return CenterCropOp{size_of(a[0])};
    }
    if (n == "hflip") {
      arity({0, 1});
      HflipOp h;
      if (a.size() == 1) {
        h.p = number_of(a[0]);
        if (!(h.p >= 0 && h.p <= 1)) throw SpecError(a[0].pos, "hflip(): need 0 <= p <= 1");
      }
      return h;
    }
    throw SpecError(pos, "unknown op '" + n + "' (known: rrc, resize, center_crop, hflip)");
  }
};

std::string num(double v) {
  char buf[32];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, ec == std::errc() ? ptr : buf);
}

std::string size_text(Size s) {
  if (s.width == s.height) return std::to_string(s.height);
  return std::to_string(s.height) + "x" + std::to_string(s.width);
}

struct Canon {
  std::string operator()(const RrcOp& r) const {
    return "rrc(" + size_text(r.size) + "," + num(r.params.scale_lo) + "," + num(r.params.scale_hi) + "," +
           num(r.params.ratio_lo) + "," + num(r.params.ratio_hi) + ")";
  }
  std::string operator()(const ResizeOp& r) const {
    // Always HxW for an exact size: "resize(N)" means the shorter side.
    if (r.shorter > 0) return "resize(" + std::to_string(r.shorter) + ")";
    return "resize(" + std::to_string(r.size.height) + "x" + std::to_string(r.size.width) + ")";
  }
  std::string operator()(const CenterCropOp& c) const { return "center_crop(" + size_text(c.size) + ")"; }
  std::string operator()(const HflipOp& h) const { return "hflip(" + num(h.p) + ")"; }
};

}  // namespace

std::string canonical_form(const std::vector<Op>& ops) {
  std::string out;
  for (const Op& op : ops) {
    if (!out.empty()) out += ';';
    out += std::visit(Canon{}, op);
  }
  return out;
}

PipelineSpec PipelineSpec::parse(std::string_view text) {
  PipelineSpec s;
  s.ops_ = Parser(text).parse();
  s.canonical_ = canonical_form(s.ops_);
  s.hash_ = XXH3_64bits_withSeed(s.canonical_.data(), s.canonical_.size(), kTransformVersion);
  return s;
}

Size PipelineSpec::output_size(int width, int height) const {
  Size cur{width, height};
  for (const Op& op : ops_) {
    if (const auto* r = std::get_if<RrcOp>(&op)) {
      cur = r->size;
    } else if (const auto* z = std::get_if<ResizeOp>(&op)) {
      cur = z->shorter > 0 ? resize_shorter_size(cur.width, cur.height, z->shorter) : z->size;
    } else if (const auto* c = std::get_if<CenterCropOp>(&op)) {
      cur = c->size;
    }
  }
  return cur;
}

}  // namespace prepfs::transform

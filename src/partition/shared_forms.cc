#include "prepfs/partition/shared_forms.h"

#include <fmt/format.h>

#include <algorithm>

namespace prepfs {

namespace {

double transfer(double latency, double bandwidth, double bytes) {
  return latency + (bandwidth > 0 ? bytes / bandwidth : 0);
}

}  // namespace

SharedFormChoice choose_shared_forms(const SharedFormInputs& in) {
  SharedFormChoice c;
  const double lat = in.shared_measured ? in.shared_latency : kSharedLatencyPrior;
  const double bw = in.shared_measured && in.shared_bandwidth > 0 ? in.shared_bandwidth : kSharedBandwidthPrior;
  const double src_raw = transfer(in.src_latency, in.src_bandwidth, in.raw_bytes);
  const double shared_raw = transfer(lat, bw, in.raw_bytes);
  const double shared_dec = transfer(lat, bw, in.decoded_bytes);
  auto ms = [](double s) { return s * 1e3; };

  // Raw bytes are always shared: a shared read spares the source a request and its egress for
  // every other node, which this node's own latency comparison cannot see (a source faster than
  // the shared tier for one node is still one source for the whole cluster).
  c.forms[index_of(Form::raw)] = true;
  c.why += fmt::format("raw shared (always: it spares the source for the other nodes): {:.2f} ms from the shared "
                       "tier vs {:.2f} ms from the source\n",
                       ms(shared_raw), ms(src_raw));

  // Without a decode (no images) there is nothing to share in decoded form.
  const double make_here = std::min(src_raw, shared_raw) + in.c_dec;
  const double margin = in.decoded_shared_now ? 1 + kSharedFormMargin : 1 - kSharedFormMargin;
  c.forms[index_of(Form::decoded)] = in.decoded_bytes > 0 && shared_dec < make_here * margin;
  c.why += fmt::format(
      "decoded {}: {:.2f} ms to read the pixels from the shared tier vs {:.2f} ms to fetch the bytes and decode "
      "them here ({:.2f} ms of CPU)\n",
      c.forms[index_of(Form::decoded)] ? "shared" : "not shared", ms(shared_dec), ms(make_here), ms(in.c_dec));
  c.why += in.shared_measured ? fmt::format("shared tier measured: {:.3f} ms per lookup, {:.0f} MB/s\n", ms(lat), bw / 1e6)
                              : fmt::format("shared tier not measured yet: priors {:.1f} ms per lookup, {:.0f} MB/s\n",
                                            ms(lat), bw / 1e6);
  return c;
}

}  // namespace prepfs

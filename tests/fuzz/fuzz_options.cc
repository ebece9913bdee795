// libFuzzer target: the mount options as a user writes them, both as an `-o` list and as a
// config file, plus the augment= pipeline spec they may carry (parsed as the daemon parses it).
//
// A bad option must be refused with Error(EINVAL) (EFBIG never: the text is in memory); an
// accepted one must leave values the daemon can use as they are.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "prepfs/common/error.h"
#include "prepfs/common/options.h"
#include "prepfs/transform/crop_sampler.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/rng.h"

namespace {

// The crop boxes an accepted rrc() draws must lie inside the image and hold a pixel: the ops
// take them as views without checking.
void check_crops(const prepfs::transform::PipelineSpec& spec) {
  namespace xf = prepfs::transform;
  for (const xf::Op& op : spec.ops()) {
    const auto* rrc = std::get_if<xf::RrcOp>(&op);
    if (!rrc) continue;
    xf::Rng rng(1);
    for (int w : {1, 7, 500, 65535})
      for (int h : {1, 3, 500, 65535}) {
        const xf::CropBox b = xf::sample_rrc_box(w, h, rrc->params, rng);
        if (b.width < 1 || b.height < 1 || b.left < 0 || b.top < 0 || b.left + b.width > w || b.top + b.height > h)
          __builtin_trap();
      }
  }
}

// What the rest of the daemon assumes of a parsed Options.
void check_usable(const prepfs::Options& o) {
  if (o.threads < 1 || o.threads > 1024 || o.aug_reuse < 1 || o.s3_connections < 1) __builtin_trap();
  if (o.max_pixels < 1 || o.s3_part_size < (64u << 10)) __builtin_trap();
  if (!(o.prefetch_idle < 0 || o.prefetch_idle >= 0.001)) __builtin_trap();  // seconds, or never
  for (int tier = 0; tier < 2; tier++) {
    double sum = 0;
    for (int form = 0; form < 3; form++) {
      double share = o.partition_shares[tier * 3 + form];
      if (!(share >= 0 && share <= 1)) __builtin_trap();
      sum += share;
    }
    if (o.partition != "auto" && !(sum <= 1.000001)) __builtin_trap();
  }
  if (o.augment.empty()) return;
  try {
    auto spec = prepfs::transform::PipelineSpec::parse(o.augment);
    // stat() sizes of augmented/ files come from here, for any image a JPEG header can describe.
    for (int w : {1, 7, 65535})
      for (int h : {1, 3, 65535}) (void)spec.output_size(w, h);
    check_crops(spec);
  } catch (const prepfs::transform::SpecError& e) {
    if (e.err() != EINVAL) __builtin_trap();
  }
}

template <class Apply>
void try_apply(Apply apply) {
  prepfs::Options o;
  try {
    apply(o);
  } catch (const prepfs::Error& e) {
    if (e.err() != EINVAL) __builtin_trap();
    return;
  }
  check_usable(o);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  try_apply([&](prepfs::Options& o) { prepfs::apply_option_list(o, text); });
  try_apply([&](prepfs::Options& o) { prepfs::apply_config_text(o, text, "fuzz.conf"); });
  return 0;
}

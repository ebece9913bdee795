#include "prepfs/model/inputs.h"

namespace prepfs::model {

std::vector<NamedInput> named_inputs(const Inputs& in) {
  return {
      {"size_raw", "B", in.size_of(Form::raw)},
      {"size_decoded", "B", in.size_of(Form::decoded)},
      {"size_augmented", "B", in.size_of(Form::augmented)},
      {"samples", "", in.samples},
      {"ram_capacity", "B", in.ram_capacity},
      {"ssd_capacity", "B", in.ssd_capacity},
      {"src_bandwidth", "B/s", in.src_bandwidth},
      {"src_latency", "s", in.src_latency},
      {"src_concurrency", "", in.src_concurrency},
      {"ssd_read_bw", "B/s", in.ssd_read_bw},
      {"ssd_write_bw", "B/s", in.ssd_write_bw},
      {"c_dec", "s", in.c_dec},
      {"c_aug", "s", in.c_aug},
      {"c_aug_from_decoded", "s", in.c_aug_from_decoded},
      {"cores", "", in.cores},
      {"copy_bw", "B/s", in.copy_bw},
      {"consumer_rate", "samples/s", in.consumer_rate},
      {"aug_reuse", "", in.aug_reuse},
      {"recent_floor", "B", in.recent_floor},
  };
}

}  // namespace prepfs::model

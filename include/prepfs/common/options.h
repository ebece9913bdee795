// Daemon options. One table of keys serves `-o key=val,...`, the config file and the docs test,
// so a key cannot exist in one place and be missing in another.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prepfs/common/forms.h"

namespace prepfs {

// One memcached server of the shared tier (shared=memcached://HOST:PORT,...).
struct SharedServer {
  std::string host;  // a name, an IPv4 address, or an IPv6 address (without brackets)
  uint16_t port = 11211;
  bool operator==(const SharedServer&) const = default;
};

struct Options {
  std::string source;  // a directory or s3://bucket/prefix
  std::string mountpoint;

  uint64_t ram_bytes = 1ull << 30;          // ram=       RAM tier budget
  uint64_t ssd_bytes = 10ull << 30;         // ssd=       SSD tier budget (0 disables the tier)
  uint64_t read_ahead_bytes = 1ull << 20;   // read_ahead= the kernel's read-ahead of the mount (0: its default)
  std::string ssd_dir;                      // ssd_dir=   empty: /var/cache/prepfs (root) or ~/.cache/prepfs
  std::string eviction = "auto";            // eviction=  auto | lru | lfu | random | none | belady | importance
  uint64_t prefetch_window = 256ull << 20;  // prefetch_window= bytes ahead of published orders (0: off)
  unsigned prefetch_threads = 16;           // prefetch_threads= prefetches in flight
  double prefetch_idle = 30;                // prefetch_idle= seconds a job's reads may stop before it holds no window (<0: never)
  bool probe_lazily = true;                 // probe= lazy | mount: when image headers are read
  double metadata_ttl = -1;                 // metadata_ttl= seconds; <0: never revalidate
  unsigned threads = 64;                    // threads=   max FUSE worker threads per session
  std::string log_level = "info";           // log_level= trace|debug|info|warn|error|off
  bool foreground = false;                  // -f
  bool debug_fuse = false;                  // -d / -o debug: libfuse request trace
  bool allow_other = false;                 // allow_other (FUSE)
  std::string metrics_addr;                 // metrics_addr= HOST:PORT of the Prometheus endpoint; empty: off

  // partition= auto (the model plans from measurements and re-plans on drift) |
  // fixed:RAW,DEC,AUG[,RAW,DEC,AUG] (percent of each tier per form; three numbers apply to both)
  std::string partition = "auto";
  double partition_shares[6] = {1, 1, 1, 1, 1, 1};  // fixed: RAM's raw/dec/aug, then SSD's, as fractions

  // decoded/ and augmented/ views
  std::string decoded_format = "ppm";  // decoded_format= ppm | npy (both views)
  std::string augment;                 // augment=   pipeline spec; empty: the default
  uint64_t seed = 0;                   // seed=      variant k of a file = f(seed, path, k)
  unsigned aug_reuse = 1;              // aug_reuse= serve each augmented variant N times
  unsigned cpu = 0;                    // cpu=       cores for transforms; 0: all
  bool cpu_auto = false;               // cpu=auto   sized from the readers' stalls and the idle CPU
  bool aug_page_cache = true;          // aug_page_cache= the kernel keeps a variant's pages across its opens
  bool render_ahead = true;            // render_ahead= a file's next variant after each serve (no order)
  uint64_t max_pixels = 100'000'000;   // max_pixels= refuse larger images (EIO)
  uint64_t max_input = 128ull << 20;   // max_input= refuse larger image files (EIO), before fetching
  uint64_t transform_mem = 0;          // transform_mem= memory of the renders in progress; 0: by cores
  bool fast_paths = true;              // fast_paths= DCT scaling for augmented/
  bool crop_decode = true;             // crop_decode= decode only the crop region (augmented/)

  // The shared tier between the node-local tiers and the source (docs/SCALING.md).
  std::vector<SharedServer> shared;   // shared= memcached://h1:11211,h2:11211; empty: none
  double shared_timeout = 0.25;       // shared_timeout= seconds any one memcached call may take
  double shared_lease_ttl = 10;       // shared_lease_ttl= seconds a fill's lease holds others off
  std::string shared_forms = "auto";  // shared_forms= auto (the plan decides) | raw/decoded lists

  // s3:// sources
  std::string s3_endpoint;             // s3_endpoint= http(s)://host[:port]; empty: AWS
  std::string s3_region;               // s3_region= empty: $AWS_REGION or us-east-1
  std::string s3_path_style = "auto";  // s3_path_style= 1 | 0 | auto
  std::string s3_profile;              // s3_profile= ~/.aws/credentials section
  unsigned s3_connections = 64;        // s3_connections= HTTP connections to the endpoint
  double s3_retry_time = 20;           // s3_retry_time= seconds a failing request is retried
  double s3_timeout = 60;              // s3_timeout= seconds one attempt of a request may take
  uint64_t s3_part_size = 8ull << 20;  // s3_part_size= larger reads become parallel parts

  // Owner of entries the source has no owner for (S3 objects); unset (0xffffffff): the mounting user.
  uint32_t uid = 0xffffffff;  // uid=
  uint32_t gid = 0xffffffff;  // gid=

  // Generic mount options that fstab/mount.fuse3 pass along and that mean nothing to us.
  std::vector<std::string> ignored;
};

struct OptionDoc {
  const char* key;
  const char* value;  // e.g. "SIZE"
  const char* help;
};
// Every key accepted by apply_option(), for --help and the man-page test.
const std::vector<OptionDoc>& option_docs();

// Whether key takes 0 or 1 (documented as BOOL); such a key given bare means 1.
bool is_boolean_option(std::string_view key);

// Applies one key[=value]. Throws Error(EINVAL) naming the key for an unknown key or a bad value.
void apply_option(Options& opts, std::string_view key, std::string_view value, bool has_value);

// Applies a FUSE-style list "ram=4G,ssd=50G,ro,_netdev". Commas inside values may be escaped "\,".
void apply_option_list(Options& opts, std::string_view list);

// Applies a config file: "key = value" lines, '#' comments, blank lines; source= and mountpoint=
// are accepted here too. Errors name the file and line.
void apply_config_file(Options& opts, const std::string& path);
// The same for config text already in memory; origin names it in errors (the file's path).
void apply_config_text(Options& opts, std::string_view text, const std::string& origin);

// Parses memcached://HOST[:PORT][,HOST[:PORT]...] (IPv6 as [ADDR]:PORT). Throws Error(EINVAL).
std::vector<SharedServer> parse_shared_url(std::string_view url);

// shared_forms= as forms: nullopt for auto (the plan decides), else which forms are shared.
std::optional<std::array<bool, kForms>> fixed_shared_forms(const Options& opts);

// Fills derived defaults (ssd_dir) and checks cross-field constraints.
void finalize_options(Options& opts);

}  // namespace prepfs

#include "prepfs/common/options.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "prepfs/common/error.h"
#include "prepfs/common/size.h"

namespace prepfs {
namespace {

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

Error bad_value(std::string_view key, std::string_view value, const std::string& why) {
  return Error(EINVAL, "option " + std::string(key) + "=" + std::string(value) + ": " + why);
}

double parse_seconds(std::string_view key, std::string_view value) {
  std::string v(value);
  if (v == "never" || v == "inf") return -1;
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  // strtod takes "nan", "infinity" and 1e999 too: NaN passes every range check after this, and
  // either one cast to milliseconds is undefined (a timeout of none, or of garbage).
  if (v.empty() || end == v.c_str() || *end != '\0' || !std::isfinite(d) || d < 0 || d > 1e9)
    throw bad_value(key, value, "expected seconds (0 to 1e9) or 'never'");
  return d;
}

unsigned parse_count(std::string_view key, std::string_view value, unsigned lo, unsigned hi) {
  std::string v(value);
  char* end = nullptr;
  unsigned long n = std::strtoul(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < lo || n > hi)
    throw bad_value(key, value, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<unsigned>(n);
}

// Options the mount(8)/fstab machinery passes that carry no meaning for prepfs.
bool is_generic_mount_option(std::string_view key) {
  // An fstab line copied from another file system's (noatime,nodiratime ...) must still mount.
  static const char* generic[] = {"ro",          "rw",         "_netdev",  "nofail",    "noauto",   "auto",
                                  "user",        "users",      "nouser",   "owner",     "group",    "dev",
                                  "nodev",       "suid",       "nosuid",   "exec",      "noexec",   "atime",
                                  "noatime",     "relatime",   "norelatime", "strictatime", "nostrictatime",
                                  "diratime",    "nodiratime", "lazytime", "nolazytime", "sync",     "async",
                                  "dirsync",     "mand",       "nomand",   "silent",    "loud",     "iversion",
                                  "noiversion",  "defaults",   "default_permissions", "fsname",   "subtype"};
  for (const char* g : generic)
    if (key == g) return true;
  return key.starts_with("x-") || key == "comment";  // the key: "comment=..." is cut at its '='
}

}  // namespace

bool is_boolean_option(std::string_view key) {
  for (const OptionDoc& d : option_docs())  // BOOL, or BOOL|auto (s3_path_style): bare means 1
    if (key == d.key) return std::string_view(d.value).starts_with("BOOL");
  return false;
}

const std::vector<OptionDoc>& option_docs() {
  static const std::vector<OptionDoc> docs = {
      {"ram", "SIZE", "RAM tier budget (default 1G; 0 disables the RAM tier)"},
      {"ssd", "SIZE", "SSD tier budget (default 10G; 0 disables the SSD tier)"},
      {"ssd_dir", "DIR", "where the SSD tier and the metadata index live (default /var/cache/prepfs as root, else "
       "$XDG_CACHE_HOME/prepfs or ~/.cache/prepfs)"},
      {"eviction", "POLICY",
       "eviction policy of both tiers: auto (default: lru, and belady while a job has published its order), lru, "
       "lfu, random, none, belady, importance"},
      {"prefetch_window", "SIZE",
       "bytes prefetched ahead of the jobs' published orders and not read yet (default 256M; 0: off)"},
      {"prefetch_threads", "N", "prefetches in flight at once (default 16)"},
      {"prefetch_idle", "SECONDS",
       "a job whose reads stop this long holds no prefetch window until it reads again (default 30; never)"},
      {"probe", "WHEN",
       "lazy (default: read image headers while serving) or mount (read them all before the mount answers)"},
      {"metadata_ttl", "SECONDS", "revalidate a file's version (size, mtime, device, inode, ctime) after this long (default never)"},
      {"threads", "N", "maximum FUSE worker threads of the main and augmented/ sessions, each (default 64)"},
      {"read_ahead", "SIZE",
       "the kernel's read-ahead on the mount, up to 16M (default 1M; 0 leaves the kernel's 128K): fewer, larger "
       "reads of decoded/ and augmented/ files; needs root"},
      {"log_level", "LEVEL", "trace, debug, info (default), warn, error or off"},
      {"partition", "PLAN",
       "auto (default: the model plans and re-plans) or fixed:RAW/DEC/AUG[/RAW/DEC/AUG]: percent of each tier (RAM, "
       "then SSD) per form"},
      {"decoded_format", "FORMAT", "ppm (default) or npy: the file format of decoded/ and augmented/"},
      {"augment", "SPEC", "augmented/ pipeline (default rrc(224,0.08,1,3/4,4/3);hflip(0.5))"},
      {"seed", "N", "seed of the augmented variants (default 0)"},
      {"aug_reuse", "N", "serve each augmented variant N times before making a new one (default 1)"},
      {"cpu", "N|auto",
       "cores the daemon may use for decoding and augmenting (default: all); auto: as many as readers wait for, "
       "within the machine's idle CPU"},
      {"max_pixels", "N", "refuse images larger than this with EIO (default 100000000)"},
      {"max_input", "SIZE", "refuse image files larger than this in decoded/ and augmented/ with EIO (default 128M)"},
      {"transform_mem", "SIZE",
       "memory all decodes and augments in progress may use together (default 128M per cpu core, at least 512M, at "
       "most a quarter of the RAM, never below 64M); as much again bounds what open augmented/ handles hold"},
      {"fast_paths", "BOOL", "DCT-domain downscaling for augmented/ (default 1)"},
      {"crop_decode", "BOOL", "decode only the crop region for augmented/ (same bytes, same errors; default 1)"},
      {"aug_page_cache", "BOOL",
       "let the kernel's page cache serve augmented/ files, a variant's repeat opens without a request (default 1)"},
      {"render_ahead", "BOOL",
       "after an open of augmented/, render that file's next variant while a cpu slot is idle (default 1)"},
      {"metrics_addr", "ADDR:PORT",
       "serve Prometheus metrics over HTTP at http://ADDR:PORT/metrics; ADDR is a numeric IPv4 or [IPv6] address "
       "(default off)"},
      {"shared", "memcached://HOST:PORT,...",
       "a tier shared by every node between the node-local tiers and the source: memcached servers, reached by "
       "consistent hashing (default: none)"},
      {"shared_timeout", "SECONDS",
       "longest any one call to a shared-tier server may take before the read goes on without it (default 0.25)"},
      {"shared_lease_ttl", "SECONDS",
       "how long a node that took a fill's lease holds the other nodes off; they then fetch it themselves (default "
       "10)"},
      {"shared_forms", "FORMS",
       "auto (default: the plan decides) or raw, decoded, raw/decoded: the forms kept in the shared tier"},
      {"s3_endpoint", "URL", "S3 endpoint of an s3:// source (default https://s3.REGION.amazonaws.com)"},
      {"s3_region", "REGION", "region requests are signed for (default $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1)"},
      {"s3_path_style", "BOOL|auto",
       "1: path-style URLs, 0: virtual-hosted, auto (default): path-style with s3_endpoint or a bucket name with dots"},
      {"s3_profile", "NAME", "profile of ~/.aws/credentials (default $AWS_PROFILE, else default)"},
      {"s3_connections", "N", "HTTP connections to the S3 endpoint (default 64)"},
      {"s3_retry_time", "SECONDS", "how long a failing S3 request is retried before EIO (default 20)"},
      {"s3_timeout", "SECONDS",
       "total time one S3 request may take before it is retried (default 60; a trickling server cannot hold a read)"},
      {"s3_part_size", "SIZE", "S3 reads larger than this are split into parallel ranged GETs (default 8M)"},
      {"uid", "N", "owner (numeric) of the entries of a source without owners, i.e. S3 (default: the mounting user)"},
      {"gid", "N", "group (numeric) of the entries of a source without owners, i.e. S3 (default: the mounting user's)"},
      {"allow_other", "BOOL", "let users other than the mounting one access the mount"},
      {"debug", "BOOL", "log every FUSE request (implies -f)"},
  };
  return docs;
}

void apply_option(Options& o, std::string_view key, std::string_view value, bool has_value) {
  // fstab users write flags: a boolean option given bare ("-o crop_decode") means 1. There is no
  // "no<key>" form: that namespace belongs to mount(8) (noauto, nodev, ...); key=0 says it.
  if (!has_value && is_boolean_option(key)) {
    value = "1";
    has_value = true;
  }
  auto need_value = [&] {
    if (!has_value || value.empty()) throw Error(EINVAL, "option " + std::string(key) + " needs a value");
  };
  auto size = [&] {
    need_value();
    try {
      return parse_size(value);
    } catch (const Error& e) {
      throw Error(EINVAL, "option " + std::string(key) + ": " + e.what());
    }
  };
  if (key == "ram")
    o.ram_bytes = size();
  else if (key == "read_ahead") {
    o.read_ahead_bytes = size();
    if (o.read_ahead_bytes > (16u << 20)) throw bad_value(key, value, "expected at most 16M");
  }
  else if (key == "ssd")
    o.ssd_bytes = size();
  else if (key == "ssd_dir") {
    need_value();
    o.ssd_dir = std::string(value);
  } else if (key == "eviction") {
    need_value();
    static const char* policies[] = {"auto", "lru", "lfu", "random", "none", "belady", "importance"};
    if (std::none_of(std::begin(policies), std::end(policies), [&](const char* p) { return value == p; }))
      throw bad_value(key, value, "expected auto, lru, lfu, random, none, belady or importance");
    o.eviction = std::string(value);
  } else if (key == "prefetch_window") {
    o.prefetch_window = size();
  } else if (key == "probe") {
    need_value();
    if (value != "lazy" && value != "mount") throw bad_value(key, value, "expected lazy or mount");
    o.probe_lazily = value == "lazy";
  } else if (key == "prefetch_threads") {
    need_value();
    o.prefetch_threads = parse_count(key, value, 1, 256);
  } else if (key == "prefetch_idle") {
    need_value();
    o.prefetch_idle = parse_seconds(key, value);  // <0: never
    if (o.prefetch_idle >= 0 && o.prefetch_idle < 0.001) throw bad_value(key, value, "expected at least 0.001 seconds or 'never'");
  } else if (key == "metadata_ttl") {
    need_value();
    o.metadata_ttl = parse_seconds(key, value);
  } else if (key == "threads") {
    need_value();
    o.threads = parse_count(key, value, 1, 1024);
  } else if (key == "log_level") {
    need_value();
    static const char* levels[] = {"trace", "debug", "info", "warn", "error", "off"};
    if (std::none_of(std::begin(levels), std::end(levels), [&](const char* l) { return value == l; }))
      throw bad_value(key, value, "expected trace, debug, info, warn, error or off");
    o.log_level = std::string(value);
  } else if (key == "partition") {
    need_value();
    std::string v(value);
    // In an -o list commas separate options, so the shares may be written RAW/DEC/AUG there
    // (or with escaped commas); a config file takes either.
    for (char& c : v)
      if (c == '/') c = ',';
    if (v == "auto") {
      o.partition = v;
      for (double& sh : o.partition_shares) sh = 1;  // unused by auto
    } else if (v.starts_with("fixed:")) {
      // Three percentages apply to both tiers; six give RAM's three, then SSD's.
      double pct[6];
      int n = 0, used = 0;
      const char* p = v.c_str() + 6;
      while (n < 6 && std::sscanf(p, "%lf%n", &pct[n], &used) == 1) {
        p += used;
        n++;
        if (*p != ',') break;
        p++;
      }
      auto sums_ok = [&](int first) { return pct[first] + pct[first + 1] + pct[first + 2] <= 100.0001; };
      bool ok = *p == 0 && (n == 3 || n == 6) && std::all_of(pct, pct + n, [](double x) { return x >= 0; }) &&
                sums_ok(0) && (n == 3 || sums_ok(3));
      if (!ok)
        throw bad_value(key, value,
                        "expected fixed:RAW/DEC/AUG (both tiers) or fixed:RAW/DEC/AUG/RAW/DEC/AUG "
                        "(RAM, then SSD): percentages of a tier summing to at most 100");
      o.partition = v;
      for (int i = 0; i < 6; i++) o.partition_shares[i] = pct[n == 3 ? i % 3 : i] / 100.0;
    } else {
      throw bad_value(key, value, "expected auto or fixed:RAW,DEC,AUG");
    }
  } else if (key == "decoded_format") {
    need_value();
    if (value != "ppm" && value != "npy") throw bad_value(key, value, "expected ppm or npy");
    o.decoded_format = std::string(value);
  } else if (key == "augment") {
    need_value();
    o.augment = std::string(value);
  } else if (key == "seed") {
    need_value();
    o.seed = parse_count(key, value, 0, 4294967295u);
  } else if (key == "aug_reuse") {
    need_value();
    o.aug_reuse = parse_count(key, value, 1, 1000000);
  } else if (key == "cpu") {
    need_value();
    o.cpu_auto = value == "auto";
    o.cpu = o.cpu_auto ? 0 : parse_count(key, value, 0, 1024);
  } else if (key == "max_pixels") {
    need_value();
    o.max_pixels = parse_count(key, value, 1, 4294967295u);
  } else if (key == "max_input") {
    o.max_input = size();
    if (o.max_input == 0) throw bad_value(key, value, "expected a size > 0");
  } else if (key == "transform_mem") {
    o.transform_mem = size();
    if (o.transform_mem < (16u << 20)) throw bad_value(key, value, "expected at least 16M");
  } else if (key == "fast_paths" || key == "crop_decode" || key == "render_ahead" || key == "aug_page_cache" ||
             key == "allow_other" || key == "debug") {
    // (Given bare, a BOOL key arrives here as 1; =0 leaves it off.)
    need_value();
    if (value != "0" && value != "1") throw bad_value(key, value, "expected 0 or 1");
    const bool on = value == "1";
    if (key == "debug") {
      o.debug_fuse = on;
      if (on) o.foreground = true;  // its trace goes to stderr
    } else {
      (key == "fast_paths"     ? o.fast_paths
       : key == "crop_decode"  ? o.crop_decode
       : key == "render_ahead" ? o.render_ahead
       : key == "allow_other"  ? o.allow_other
                               : o.aug_page_cache) = on;
    }
  } else if (key == "metrics_addr") {
    need_value();
    size_t colon = value.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == value.size())
      throw bad_value(key, value, "expected HOST:PORT, for example 127.0.0.1:9100");
    o.metrics_addr = std::string(value);
  } else if (key == "shared") {
    need_value();
    o.shared = parse_shared_url(value);
  } else if (key == "shared_timeout" || key == "shared_lease_ttl") {
    need_value();
    const double s = parse_seconds(key, value);
    const double lo = key == "shared_timeout" ? 0.001 : 1, hi = key == "shared_timeout" ? 60 : 3600;
    if (s < lo || s > hi) throw bad_value(key, value, fmt::format("expected seconds in [{:g}, {:g}]", lo, hi));
    (key == "shared_timeout" ? o.shared_timeout : o.shared_lease_ttl) = s;
  } else if (key == "shared_forms") {
    need_value();
    o.shared_forms = std::string(value);
    for (char& c : o.shared_forms)
      if (c == ',') c = '/';
    if (o.shared_forms != "auto" && o.shared_forms != "raw" && o.shared_forms != "decoded" &&
        o.shared_forms != "raw/decoded" && o.shared_forms != "decoded/raw")
      throw bad_value(key, value, "expected auto, raw, decoded or raw/decoded");
  } else if (key == "s3_endpoint") {
    need_value();
    o.s3_endpoint = std::string(value);
  } else if (key == "s3_region") {
    need_value();
    o.s3_region = std::string(value);
  } else if (key == "s3_path_style") {
    need_value();
    if (value != "0" && value != "1" && value != "auto") throw bad_value(key, value, "expected 0, 1 or auto");
    o.s3_path_style = std::string(value);
  } else if (key == "s3_profile") {
    need_value();
    o.s3_profile = std::string(value);
  } else if (key == "s3_connections") {
    need_value();
    o.s3_connections = parse_count(key, value, 1, 1024);
  } else if (key == "s3_retry_time") {
    need_value();
    o.s3_retry_time = parse_seconds(key, value);
    if (o.s3_retry_time < 0) throw bad_value(key, value, "expected seconds >= 0");
  } else if (key == "s3_timeout") {
    need_value();
    o.s3_timeout = parse_seconds(key, value);
    // In whole milliseconds below: less than one would be 0, no timeout at all.
    if (o.s3_timeout < 0.001) throw bad_value(key, value, "expected at least 0.001 seconds");
  } else if (key == "s3_part_size") {
    o.s3_part_size = size();
    if (o.s3_part_size < (64u << 10)) throw bad_value(key, value, "expected at least 64K");
  } else if (key == "uid" || key == "gid") {
    need_value();
    (key == "uid" ? o.uid : o.gid) = parse_count(key, value, 0, 4294967294u);
  } else if (is_generic_mount_option(key))
    o.ignored.push_back(std::string(key));
  else
    throw Error(EINVAL, "unknown option '" + std::string(key) + "' (see prepfs --help)");
}

void apply_option_list(Options& o, std::string_view list) {
  std::string item;
  // shared=memcached://h1:11211,h2:11211 has commas of its own: after shared=, items that are
  // HOST:PORT (no option key has a colon) continue its server list.
  std::string shared_url;
  auto flush = [&] {
    std::string t = trim(item);
    item.clear();
    if (t.empty()) return;
    size_t eq = t.find('=');
    if (eq == std::string::npos && !shared_url.empty() && t.find(':') != std::string::npos) {
      shared_url += "," + t;
      apply_option(o, "shared", shared_url, true);
      return;
    }
    shared_url.clear();
    if (eq == std::string::npos) {
      apply_option(o, t, "", false);
      return;
    }
    const std::string key = trim(t.substr(0, eq)), value = trim(t.substr(eq + 1));
    apply_option(o, key, value, true);
    if (key == "shared") shared_url = value;
  };
  for (size_t i = 0; i < list.size(); i++) {
    if (list[i] == '\\' && i + 1 < list.size() && list[i + 1] == ',') {
      item += ',';
      i++;
    } else if (list[i] == ',')
      flush();
    else
      item += list[i];
  }
  flush();
}

void apply_config_text(Options& o, std::string_view text, const std::string& origin) {
  int lineno = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    lineno++;
    size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    std::string t = trim(line);
    if (t.empty()) continue;
    size_t eq = t.find('=');
    std::string key = trim(t.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : trim(t.substr(eq + 1));
    try {
      if (key == "source")
        o.source = value;
      else if (key == "mountpoint")
        o.mountpoint = value;
      else
        apply_option(o, key, value, eq != std::string::npos);
    } catch (const Error& e) {
      throw Error(e.err(), origin + ":" + std::to_string(lineno) + ": " + e.what());
    }
  }
}

void apply_config_file(Options& o, const std::string& path) {
  // A config file is a few dozen lines; the cap keeps a mistaken path (/dev/zero, a disk image)
  // from filling memory.
  constexpr size_t kMaxConfigBytes = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_errno(errno ? errno : ENOENT, "config file " + path);
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw_errno(errno ? errno : EIO, "config file " + path);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) throw Error(EFBIG, "config file " + path + " is larger than 1 MiB");
  apply_config_text(o, text, path);
}

std::vector<SharedServer> parse_shared_url(std::string_view url) {
  constexpr std::string_view kScheme = "memcached://";
  const std::string original(url);
  if (!url.starts_with(kScheme)) throw bad_value("shared", original, "expected memcached://HOST:PORT[,HOST:PORT...]");
  url.remove_prefix(kScheme.size());
  std::vector<SharedServer> servers;
  while (true) {
    const size_t comma = url.find(',');
    const std::string item = trim(url.substr(0, comma));
    SharedServer s;
    std::string port;
    if (item.starts_with("[")) {  // [IPv6]:PORT
      const size_t close = item.find(']');
      if (close == std::string::npos) throw bad_value("shared", original, "unclosed [ in " + item);
      s.host = item.substr(1, close - 1);
      if (close + 1 < item.size()) {
        if (item[close + 1] != ':') throw bad_value("shared", original, "expected [ADDR]:PORT, not " + item);
        port = item.substr(close + 2);
      }
    } else {
      const size_t colon = item.rfind(':');
      s.host = item.substr(0, colon);
      if (colon != std::string::npos) port = item.substr(colon + 1);
      if (s.host.find(':') != std::string::npos)
        throw bad_value("shared", original, "write an IPv6 address as [ADDR]:PORT: " + item);
    }
    if (s.host.empty() || s.host.find_first_of(" /?#@") != std::string::npos)
      throw bad_value("shared", original, "expected HOST:PORT, not '" + item + "'");
    if (!port.empty() || item.ends_with(":")) s.port = static_cast<uint16_t>(parse_count("shared", port, 1, 65535));
    if (std::find(servers.begin(), servers.end(), s) != servers.end())
      throw bad_value("shared", original, item + " is listed twice");
    servers.push_back(s);
    if (comma == std::string_view::npos) break;
    url.remove_prefix(comma + 1);
  }
  return servers;
}

std::optional<std::array<bool, kForms>> fixed_shared_forms(const Options& o) {
  if (o.shared_forms == "auto") return std::nullopt;
  std::array<bool, kForms> forms{};
  forms[index_of(Form::raw)] = o.shared_forms.find("raw") != std::string::npos;
  forms[index_of(Form::decoded)] = o.shared_forms.find("decoded") != std::string::npos;
  return forms;
}

void finalize_options(Options& o) {
  if (o.ssd_dir.empty()) {
    if (geteuid() == 0) {
      o.ssd_dir = "/var/cache/prepfs";
    } else {
      // Never a shared fallback such as /tmp: the cache holds bytes served as the source's.
      const char* xdg = std::getenv("XDG_CACHE_HOME");
      const char* home = std::getenv("HOME");
      if (xdg && *xdg == '/')
        o.ssd_dir = std::string(xdg) + "/prepfs";
      else if (home && *home == '/')
        o.ssd_dir = std::string(home) + "/.cache/prepfs";
      else
        throw Error(EINVAL, "no ssd_dir given and neither HOME nor XDG_CACHE_HOME is set: give -o ssd_dir=DIR");
    }
  }
  // Absolute now: a daemon in the background works from "/", where a relative ssd_dir would name
  // another directory for every path made from it later (the index's, at each save).
  if (o.ssd_dir.front() != '/') o.ssd_dir = std::filesystem::absolute(o.ssd_dir).lexically_normal().string();
}

}  // namespace prepfs

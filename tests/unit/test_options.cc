#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/common/log.h"
#include "prepfs/common/options.h"
#include "prepfs/common/size.h"
#include "temp_dir.h"

using namespace prepfs;

// A system service has no HOME (systemd sets none without User=): ~/.aws/credentials must still
// be found, through the password entry. It was looked for through $HOME alone.
TEST(HomeDirectory, WithoutHomeItIsThePasswordEntrys) {
  const char* saved = std::getenv("HOME");
  const std::string was = saved ? saved : "";
  ::setenv("HOME", "/somewhere/else", 1);
  EXPECT_EQ(home_directory(), "/somewhere/else");
  ::unsetenv("HOME");
  const struct passwd* pw = ::getpwuid(::geteuid());
  ASSERT_NE(pw, nullptr);
  EXPECT_EQ(home_directory(), pw->pw_dir);
  EXPECT_FALSE(home_directory().empty());
  if (saved) ::setenv("HOME", was.c_str(), 1);
}

TEST(Size, ParsesUnits) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("4G"), 4ull << 30);
  EXPECT_EQ(parse_size("4g"), 4ull << 30);
  EXPECT_EQ(parse_size("4GB"), 4ull << 30);
  EXPECT_EQ(parse_size("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_size("1.5T"), 3ull << 39);
  EXPECT_EQ(parse_size("10K"), 10240u);
  EXPECT_EQ(parse_size(".5K"), 512u);
  EXPECT_EQ(parse_size("8191P"), 8191ull << 50);  // the largest whole P below 2^63
}

TEST(Size, RejectsGarbageWithAMessageNamingIt) {
  // ".G" read as 0 (a tier quietly off); "12000P" (2^63 and up) overflowed llround.
  for (const char* bad : {"", "G", "4X", "-1", "4.2.1G", "1.5", "99999999999P", "4 G B", ".G", ".", "12000P", "8E"}) {
    try {
      parse_size(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), EINVAL);
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Size, Formats) {
  EXPECT_EQ(format_size(512), "512B");
  EXPECT_EQ(format_size(4ull << 30), "4.0G");
}

// A daemon in the background works from "/": a relative ssd_dir named another directory for the
// paths made from it later (the index's, saved at each change). It is made absolute at once.
TEST(Options, ARelativeSsdDirIsMadeAbsoluteAgainstTheWorkingDirectory) {
  Options o;
  apply_option_list(o, "ssd_dir=cache/./x");
  finalize_options(o);
  EXPECT_EQ(o.ssd_dir, (std::filesystem::current_path() / "cache/x").string());
  Options a;
  apply_option_list(a, "ssd_dir=/var/cache/x");
  finalize_options(a);
  EXPECT_EQ(a.ssd_dir, "/var/cache/x");
}

TEST(Options, FuseStyleList) {
  Options o;
  apply_option_list(
      o, "ram=512M,ssd=50G,ssd_dir=/var/cache/x,eviction=random,metadata_ttl=2.5,threads=32,ro,_netdev,allow_other");
  EXPECT_EQ(o.ram_bytes, 512ull << 20);
  EXPECT_EQ(o.ssd_bytes, 50ull << 30);
  EXPECT_EQ(o.ssd_dir, "/var/cache/x");
  EXPECT_EQ(o.eviction, "random");
  EXPECT_DOUBLE_EQ(o.metadata_ttl, 2.5);
  EXPECT_EQ(o.threads, 32u);
  EXPECT_TRUE(o.allow_other);
  EXPECT_EQ(o.ignored.size(), 2u);  // ro, _netdev: meaningful to mount(8), not to us
}

TEST(Options, EscapedCommaInValue) {
  Options o;
  apply_option_list(o, "ssd_dir=/a\\,b,ram=1G");
  EXPECT_EQ(o.ssd_dir, "/a,b");
  EXPECT_EQ(o.ram_bytes, 1ull << 30);
}

TEST(Options, ErrorsNameTheKey) {
  Options o;
  auto message = [&](const char* list) {
    try {
      apply_option_list(o, list);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("bogus=1").find("bogus"), std::string::npos);
  EXPECT_NE(message("ram=lots").find("lots"), std::string::npos);
  EXPECT_NE(message("eviction=fifo").find("eviction"), std::string::npos);
  EXPECT_NE(message("threads=0").find("threads"), std::string::npos);
  EXPECT_NE(message("ram").find("needs a value"), std::string::npos);
  EXPECT_NE(message("log_level=chatty").find("log_level"), std::string::npos);
}

TEST(Options, ConfigFileThenOverrides) {
  test::TempDir dir;
  dir.write("c.conf", "# comment\nsource = /data/x\nmountpoint=/mnt/x\nram = 2G  # inline\n\nssd=0\n");
  Options o;
  apply_config_file(o, dir / "c.conf");
  EXPECT_EQ(o.source, "/data/x");
  EXPECT_EQ(o.mountpoint, "/mnt/x");
  EXPECT_EQ(o.ram_bytes, 2ull << 30);
  EXPECT_EQ(o.ssd_bytes, 0u);
  apply_option_list(o, "ram=3G");  // -o comes after the file, so it wins
  EXPECT_EQ(o.ram_bytes, 3ull << 30);
}

TEST(Options, ConfigFileErrorsNameFileAndLine) {
  test::TempDir dir;
  dir.write("c.conf", "ram = 1G\nwhat = ever\n");
  Options o;
  try {
    apply_config_file(o, dir / "c.conf");
    FAIL() << "unknown key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.conf:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("what"), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply_config_file(o, dir / "missing.conf"), Error);
}

TEST(Options, ConfigTextIsTheFileWithoutTheFile) {
  Options o;
  apply_config_text(o, "ssd = 5G\r\n# x\nseed=3", "inline");  // CRLF and no final newline
  EXPECT_EQ(o.ssd_bytes, 5ull << 30);
  EXPECT_EQ(o.seed, 3u);
  try {
    apply_config_text(o, "\n\nram = lots\n", "inline");
    FAIL() << "bad size accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inline:3"), std::string::npos) << e.what();
  }
  // A config path pointing at something huge (a disk image, /dev/zero) is refused, not slurped.
  test::TempDir dir;
  dir.write("big.conf", std::string((1 << 20) + 1, '#'));
  try {
    apply_config_file(o, dir / "big.conf");
    FAIL() << "a 1 MiB config file accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EFBIG);
  }
}

TEST(Options, EveryDocumentedKeyIsAccepted) {
  for (const auto& d : option_docs()) {
    Options o;
    std::string value = std::string(d.value).empty()
                            ? ""
                            : (std::string(d.value) == "SIZE"                     ? "16M"
                               : std::string(d.value) == "SECONDS"                ? "5"
                               : std::string(d.value) == "N"                      ? "8"
                               : std::string(d.value) == "N|auto"                 ? "auto"
                               : std::string(d.value) == "POLICY"                 ? "lru"
                               : std::string(d.value) == "LEVEL"                  ? "warn"
                               : std::string(d.value) == "FORMAT"                 ? "npy"
                               : std::string(d.value) == "PLAN"                   ? "fixed:10/20/70"
                               : std::string(d.value) == "BOOL"                   ? "0"
                               : std::string(d.value) == "WHEN"                   ? "mount"
                               : std::string(d.value) == "SPEC"                   ? "resize(256);center_crop(224)"
                               : std::string(d.value) == "ADDR:PORT"              ? "127.0.0.1:9100"
                               : std::string(d.value) == "BOOL|auto"              ? "auto"
                               : std::string(d.value) == "FORMS"                  ? "raw/decoded"
                               : std::string(d.value).starts_with("memcached://") ? "memcached://127.0.0.1:11211"
                                                                                  : "/x");
    EXPECT_NO_THROW(apply_option(o, d.key, value, !value.empty())) << d.key;
  }
}

TEST(Options, CpuIsACountOrAuto) {
  Options o;
  EXPECT_FALSE(o.cpu_auto);
  apply_option_list(o, "cpu=auto");
  EXPECT_TRUE(o.cpu_auto);
  apply_option_list(o, "cpu=3");  // the last one given wins
  EXPECT_FALSE(o.cpu_auto);
  EXPECT_EQ(o.cpu, 3u);
  EXPECT_THROW(apply_option_list(o, "cpu=many"), Error);
  EXPECT_THROW(apply_option_list(o, "cpu=Auto"), Error);
  EXPECT_TRUE(o.render_ahead);
  apply_option_list(o, "render_ahead=0");
  EXPECT_FALSE(o.render_ahead);
}

TEST(Options, Partition) {
  Options o;
  apply_option_list(o, "partition=fixed:20/30/50");
  EXPECT_DOUBLE_EQ(o.partition_shares[1], 0.3);
  apply_option_list(o, "partition=fixed:20\\,30\\,50");  // escaped commas in an -o list
  EXPECT_DOUBLE_EQ(o.partition_shares[1], 0.3);
  apply_option(o, "partition", "fixed:20,30,50", true);  // as a config file gives it
  EXPECT_DOUBLE_EQ(o.partition_shares[0], 0.2);
  EXPECT_DOUBLE_EQ(o.partition_shares[2], 0.5);
  EXPECT_DOUBLE_EQ(o.partition_shares[4], 0.3);             // three numbers apply to both tiers
  apply_option_list(o, "partition=fixed:0/100/0/60/0/40");  // RAM's three, then SSD's
  EXPECT_DOUBLE_EQ(o.partition_shares[1], 1.0);
  EXPECT_DOUBLE_EQ(o.partition_shares[3], 0.6);
  EXPECT_DOUBLE_EQ(o.partition_shares[5], 0.4);
  apply_option_list(o, "partition=auto");
  EXPECT_EQ(o.partition, "auto");
  for (const char* bad : {"partition=fixed:50/50/50", "partition=fixed:1/2", "partition=fixed:-1/0/0",
                          "partition=manual", "partition=fixed:1/2/3x", "partition=fixed:1/2/3/4",
                          "partition=fixed:0/0/0/50/50/1", "partition=fixed:1/2/3/4/5/6/7"})
    EXPECT_THROW(apply_option_list(o, bad), Error) << bad;
}

#include "prepfs/common/mountinfo.h"

TEST(Mountinfo, ParsesTheFieldsAfterOptionalOnesAndDecodesEscapes) {
  prepfs::MountEntry e;
  ASSERT_TRUE(prepfs::parse_mountinfo_line(
      "36 35 0:52 / /mnt/with\\040space rw,nosuid shared:7 master:1 - fuse.prepfs /data rw,user_id=0", &e));
  EXPECT_EQ(e.major, 0u);
  EXPECT_EQ(e.minor, 52u);
  EXPECT_EQ(e.mount_point, "/mnt/with space");
  EXPECT_EQ(e.fstype, "fuse.prepfs");
  ASSERT_TRUE(prepfs::parse_mountinfo_line("22 1 8:1 / / rw - ext4 /dev/sda1 rw", &e));
  EXPECT_EQ(e.major, 8u);
  EXPECT_EQ(e.mount_point, "/");
  EXPECT_FALSE(prepfs::parse_mountinfo_line("garbage", &e));
  EXPECT_FALSE(prepfs::parse_mountinfo_line("36 35 0:52 / /mnt rw no-separator-here", &e));
  // This process's own table parses, and has a root.
  bool root = false;
  for (const prepfs::MountEntry& m : prepfs::read_mountinfo()) root |= m.mount_point == "/";
  EXPECT_TRUE(root);
}

TEST(Options, BareBooleanFlagsMeanOne) {
  Options o;
  o.fast_paths = false;
  apply_option_list(o, "s3_path_style,crop_decode,fast_paths");
  EXPECT_EQ(o.s3_path_style, "1");
  EXPECT_TRUE(o.crop_decode);
  EXPECT_TRUE(o.fast_paths);
  test::TempDir dir;
  dir.write("c.conf", "crop_decode\n");  // a config-file line without '=' is a flag too
  Options c;
  apply_config_file(c, dir / "c.conf");
  EXPECT_TRUE(c.crop_decode);
  EXPECT_THROW(apply_option_list(o, "nocrop_decode"), Error);  // no "no" form: key=0 says it
  EXPECT_THROW(apply_option_list(o, "ram"), Error);            // a size is not a flag
}

// allow_other and debug are flags: =0 leaves them off. Any value used to turn them on, so
// "allow_other=0" in a config file opened the mount to every user, and "debug=0" kept a mount
// from fstab in the foreground.
TEST(Options, FlagsGivenZeroStayOff) {
  Options o;
  apply_option_list(o, "allow_other=0,debug=0");
  EXPECT_FALSE(o.allow_other);
  EXPECT_FALSE(o.debug_fuse);
  EXPECT_FALSE(o.foreground);
  apply_option_list(o, "allow_other,debug=1");
  EXPECT_TRUE(o.allow_other);
  EXPECT_TRUE(o.debug_fuse);
  EXPECT_TRUE(o.foreground);
  EXPECT_THROW(apply_option_list(o, "allow_other=no"), Error);
  apply_option_list(o, "comment=x-systemd.foo,x-gvfs-hide");  // mount(8)'s own, ignored
  // An fstab line copied from another file system's: these failed the mount as unknown options.
  EXPECT_NO_THROW(apply_option_list(o, "noatime,nodiratime,lazytime,sync,async,strictatime,dirsync"));
  EXPECT_THROW(apply_option_list(o, "nodiratimes"), Error);  // still no typo passes
  // s3_path_style is a mode, but bare it still means 1.
  apply_option_list(o, "s3_path_style");
  EXPECT_EQ(o.s3_path_style, "1");
}

TEST(Options, ReadAheadIsASizeUpTo16M) {
  Options o;
  EXPECT_EQ(o.read_ahead_bytes, 1u << 20);
  apply_option_list(o, "read_ahead=0");
  EXPECT_EQ(o.read_ahead_bytes, 0u);
  apply_option_list(o, "read_ahead=16M");
  EXPECT_EQ(o.read_ahead_bytes, 16u << 20);
  EXPECT_THROW(apply_option_list(o, "read_ahead=17M"), Error);
  EXPECT_THROW(apply_option_list(o, "read_ahead"), Error);
}

// Seconds are finite and within reason: strtod takes "nan", "infinity" and 1e999, which passed
// the range checks (NaN fails every comparison) and were then cast to milliseconds, undefined
// (s3_timeout=nan could mean no timeout at all). 0.0004 s was 0 ms, no timeout either.
TEST(Options, SecondsAreFiniteAndAtLeastAMillisecondWhereMilliseconds) {
  for (const char* bad : {"metadata_ttl=nan", "metadata_ttl=infinity", "metadata_ttl=1e999", "shared_timeout=nan",
                          "shared_lease_ttl=nan", "s3_timeout=nan", "s3_timeout=1e999", "s3_timeout=0.0004",
                          "s3_retry_time=infinity", "prefetch_idle=0", "prefetch_idle=nan"}) {
    Options o;
    EXPECT_THROW(apply_option_list(o, bad), Error) << bad;
  }
  Options o;
  apply_option_list(o, "metadata_ttl=never,s3_timeout=0.5,metadata_ttl=2.5,prefetch_idle=0.2");
  EXPECT_EQ(o.metadata_ttl, 2.5);
  EXPECT_EQ(o.prefetch_idle, 0.2);
  apply_option_list(o, "prefetch_idle=never");
  EXPECT_LT(o.prefetch_idle, 0);
}

TEST(Options, SharedServerListKeepsItsCommasInAnOptionList) {
  Options o;
  apply_option_list(o, "ram=1G,shared=memcached://h1:11211,h2:11300,[::1]:11400,ssd=2G,shared_forms=raw/decoded");
  ASSERT_EQ(o.shared.size(), 3u);
  EXPECT_EQ(o.shared[0], (SharedServer{"h1", 11211}));
  EXPECT_EQ(o.shared[1], (SharedServer{"h2", 11300}));
  EXPECT_EQ(o.shared[2], (SharedServer{"::1", 11400}));
  EXPECT_EQ(o.ssd_bytes, 2ull << 30);  // the list ended at the next key=value
  auto forms = fixed_shared_forms(o);
  ASSERT_TRUE(forms.has_value());
  EXPECT_TRUE((*forms)[index_of(Form::raw)]);
  EXPECT_TRUE((*forms)[index_of(Form::decoded)]);
  EXPECT_FALSE((*forms)[index_of(Form::augmented)]);
}

TEST(Options, SharedInAConfigFileAndItsDefaults) {
  Options o;
  EXPECT_TRUE(o.shared.empty());
  EXPECT_FALSE(fixed_shared_forms(o).has_value());  // auto
  apply_config_text(o, "shared = memcached://cache1,cache2:11212\nshared_timeout = 0.5\nshared_lease_ttl = 3\n",
                    "prepfs.conf");
  ASSERT_EQ(o.shared.size(), 2u);
  EXPECT_EQ(o.shared[0], (SharedServer{"cache1", 11211}));  // the default port
  EXPECT_EQ(o.shared[1], (SharedServer{"cache2", 11212}));
  EXPECT_DOUBLE_EQ(o.shared_timeout, 0.5);
  EXPECT_DOUBLE_EQ(o.shared_lease_ttl, 3);
}

TEST(Options, SharedRejectsWhatIsNoServerList) {
  for (const char* bad : {"shared=redis://h:6379", "shared=memcached://", "shared=memcached://h:0",
                          "shared=memcached://h:70000", "shared=memcached://h:1,h:1", "shared=memcached://::1:5",
                          "shared=memcached://[::1", "shared=memcached://h:", "shared_timeout=0", "shared_timeout=x",
                          "shared_lease_ttl=0.5", "shared_forms=augmented", "ram=1G,h2:11211"}) {
    Options o;
    try {
      apply_option_list(o, bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), EINVAL) << bad;
    }
  }
}

// A background daemon switches its log to syslog once the mount's threads run. Replacing
// spdlog's default logger then freed the one those threads were writing through (a crash at
// mount time, for fstab mounts only). The logger stays; what it writes to is swapped.
TEST(Logging, ASecondInitWhileThreadsLogKeepsTheLoggerTheyWriteThrough) {
  init_logging("critical");
  const std::weak_ptr<spdlog::logger> before = spdlog::default_logger();  // (an address could be reused)
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&] {
      while (!stop) spdlog::info("below the level: never written");
    });
  for (int i = 0; i < 200; i++) init_logging("critical", i % 2 ? LogTarget::syslog : LogTarget::stderr_);
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(before.expired()) << "the logger the threads wrote through was freed";
  EXPECT_EQ(spdlog::default_logger(), before.lock());
  init_logging("warn");
}


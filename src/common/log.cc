#include "prepfs/common/log.h"

#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <syslog.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "prepfs/common/error.h"

namespace prepfs {
namespace {

// The default logger's one sink, made once. A later call (a background daemon going to syslog)
// runs while the mount's threads log: replacing the default logger then would free the one they
// are writing through (spdlog's set_default_logger is not safe against concurrent logging), so
// what this sink writes to is swapped instead, under its own lock.
std::mutex g_init_mu;
std::shared_ptr<spdlog::sinks::dist_sink_mt> g_sinks;

}  // namespace

void init_logging(const std::string& level, LogTarget target) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") throw Error(EINVAL, "unknown log level '" + level + "'");
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (target == LogTarget::syslog) {
    sink = std::make_shared<spdlog::sinks::syslog_sink_mt>("prepfs", LOG_PID, LOG_DAEMON, true);
    sink->set_pattern("%v");
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    const char* journal = std::getenv("JOURNAL_STREAM");
    // journald timestamps every line itself; a second timestamp only adds noise.
    sink->set_pattern(journal && *journal ? "%l: %v" : "%Y-%m-%d %H:%M:%S.%e prepfs[%P] %l: %v");
  }
  std::lock_guard lock(g_init_mu);
  if (g_sinks) {
    g_sinks->set_sinks({sink});
    spdlog::default_logger_raw()->set_level(lvl);
    return;
  }
  g_sinks = std::make_shared<spdlog::sinks::dist_sink_mt>(std::vector<std::shared_ptr<spdlog::sinks::sink>>{sink});
  auto logger = std::make_shared<spdlog::logger>("prepfs", g_sinks);
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);  // before any thread exists (see above)
}

}  // namespace prepfs

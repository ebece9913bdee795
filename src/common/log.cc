#include "prepfs/common/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <syslog.h>

#include <cerrno>
#include <cstdlib>

#include "prepfs/common/error.h"

namespace prepfs {

void init_logging(const std::string& level, LogTarget target) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") throw Error(EINVAL, "unknown log level '" + level + "'");
  std::shared_ptr<spdlog::logger> logger;
  if (target == LogTarget::syslog) {
    logger = std::make_shared<spdlog::logger>(
        "prepfs", std::make_shared<spdlog::sinks::syslog_sink_mt>("prepfs", LOG_PID, LOG_DAEMON, true));
    logger->set_pattern("%v");
  } else {
    logger = std::make_shared<spdlog::logger>("prepfs", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    const char* journal = std::getenv("JOURNAL_STREAM");
    // journald timestamps every line itself; a second timestamp only adds noise.
    logger->set_pattern(journal && *journal ? "%l: %v" : "%Y-%m-%d %H:%M:%S.%e prepfs[%P] %l: %v");
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace prepfs

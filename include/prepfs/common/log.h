// One spdlog logger for the whole daemon. Under systemd (JOURNAL_STREAM set) lines carry no
// timestamp, since journald adds its own; a background daemon without a terminal logs to syslog.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace prepfs {

enum class LogTarget { stderr_, syslog };

// Throws Error(EINVAL) for an unknown level name.
void init_logging(const std::string& level, LogTarget target = LogTarget::stderr_);

}  // namespace prepfs

// systemd readiness (Type=notify). A no-op when not started by systemd or built without it.
#pragma once

#include <string>

namespace prepfs {

void sd_notify_ready(const std::string& status);
void sd_notify_stopping();

}  // namespace prepfs

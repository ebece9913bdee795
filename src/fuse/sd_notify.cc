#include "prepfs/fuse/sd_notify.h"

#include "prepfs_config.h"

#if HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace prepfs {

void sd_notify_ready(const std::string& status) {
#if HAVE_LIBSYSTEMD
  sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
#else
  (void)status;
#endif
}

void sd_notify_stopping() {
#if HAVE_LIBSYSTEMD
  sd_notify(0, "STOPPING=1\nSTATUS=unmounting");
#endif
}

}  // namespace prepfs

// The one error type of prepfs: an errno plus a human message. Everything below the FUSE
// adaptor throws it; fuse/errno_map.cc is the single place that turns exceptions into errno.
#pragma once

#include <stdexcept>
#include <string>

namespace prepfs {

class Error : public std::runtime_error {
 public:
  Error(int err, const std::string& msg) : std::runtime_error(msg), err_(err) {}
  int err() const noexcept { return err_; }

 private:
  int err_;
};

// Throws Error(err, what + ": " + strerror(err)).
[[noreturn]] void throw_errno(int err, const std::string& what);

}  // namespace prepfs

#include "prepfs/common/error.h"

#include <cerrno>
#include <cstring>
#include <new>

namespace prepfs {

void throw_errno(int err, const std::string& what) {
  throw Error(err, what + ": " + std::strerror(err));
}

int errno_of(const std::exception& e) noexcept {
  if (auto* pe = dynamic_cast<const Error*>(&e)) return pe->err() > 0 ? pe->err() : EIO;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ENOMEM;
  return EIO;
}

}  // namespace prepfs

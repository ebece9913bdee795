#include "prepfs/fuse/errno_map.h"

#include <cerrno>
#include <new>

#include "prepfs/common/error.h"

namespace prepfs {

int errno_of(const std::exception& e) noexcept {
  if (auto* pe = dynamic_cast<const Error*>(&e)) return pe->err() > 0 ? pe->err() : EIO;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ENOMEM;
  return EIO;
}

}  // namespace prepfs

#include "prepfs/common/error.h"

#include <cerrno>
#include <cstring>

namespace prepfs {

void throw_errno(int err, const std::string& what) { throw Error(err, what + ": " + std::strerror(err)); }

}  // namespace prepfs

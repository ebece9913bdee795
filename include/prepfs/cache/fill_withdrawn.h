// The one way a fill may decline to answer (TierManager::get_or_fill).
#pragma once

#include <cerrno>
#include <string>

#include "prepfs/common/error.h"

namespace prepfs {

// Thrown by a fill that withdraws rather than answers: work ahead that gives way to readers
// (the renderer's, on transform memory). It fails its own flight only; a reader that joined the
// flight fills for itself, since the reason to withdraw was not its own. Its errno stays EBUSY
// for a caller that sees it outside a flight.
class FillWithdrawn : public Error {
 public:
  explicit FillWithdrawn(const std::string& msg) : Error(EBUSY, msg) {}
};

}  // namespace prepfs

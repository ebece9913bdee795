// The one map from the core's exceptions to the errno a FUSE reply carries.
#pragma once

#include <exception>

namespace prepfs {

// errno of an in-flight exception: Error gives its own, bad_alloc ENOMEM, anything else EIO.
int errno_of(const std::exception& e) noexcept;

}  // namespace prepfs

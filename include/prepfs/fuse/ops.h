// The libfuse low-level op table over a FuseSession's Filesystem (ops.cc).
#pragma once

struct fuse_lowlevel_ops;

namespace prepfs {

const fuse_lowlevel_ops& fuse_ops();

}  // namespace prepfs

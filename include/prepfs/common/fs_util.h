// Small file-system, machine and clock helpers shared by the layers.
#pragma once

#include <cstdint>
#include <string>

namespace prepfs {

// mkdir -p with mode 0755. Throws Error naming the directory that could not be created.
void mkdir_p(const std::string& path);

// fsync()s the directory that holds path, so that a file created or renamed there survives a
// crash. Returns the errno of the failure, or 0.
int sync_parent_dir(const std::string& path);

// $HOME, or else the home directory of the effective user's password entry ("" if none): a
// system service runs without HOME, and its user's files (~/.aws/credentials) are still there.
std::string home_directory();

// The machine's physical memory in bytes.
uint64_t physical_memory_bytes();

// Wall-clock time in nanoseconds since the epoch (for synthesised mtimes).
int64_t wall_clock_ns();

}  // namespace prepfs

// Text inside a JSON string: the one escaper for every name the JSON outputs carry (server
// names, decision reasons), so that no name can break `.prepfs/stats` or `prepctl`.
#pragma once

#include <string>
#include <string_view>

namespace prepfs {

// s with '"', '\' and control characters escaped (\uXXXX), ready to go between two quotes.
std::string json_escaped(std::string_view s);

}  // namespace prepfs

// The shared tier's part of .prepfs/plan (prepctl plan): which forms the cluster shares and why,
// what its servers hold, and what a lookup measured (latency, bandwidth).
#pragma once

#include <string>

#include "prepfs/cache/shared_tier.h"

namespace prepfs {

// `forms_fixed`: shared_forms= names the forms; else `auto_why` says why auto chose them (one
// line per form, from choose_shared_forms). Empty without a shared tier.
std::string shared_plan_text(SharedTier* shared, bool forms_fixed, const std::string& auto_why);

}  // namespace prepfs

// The .prepfs/ files through which a training job talks to the daemon (docs/SAMPLER.md):
//   samples     (read)  one line per sample: RAW_PATH<TAB>IMAGE_PATH, line i = sample index i
//   resident    (read)  a bitmap, LSB first: bit i set while sample i is cached in some form
//   order       (write) `job NAME`, then the job's upcoming accesses as mount-relative paths in
//                       any view, appended; `reset` drops its pending future, `end` ends the job
//   importance  (write) `INDEX VALUE` lines (or `PATH VALUE`): per-sample importance, e.g. loss
// Lines may arrive split across writes; a session per open handle keeps the partial line.
// Unknown paths and indices are skipped and logged once per handle (a job's one typo must not
// lose the rest of its order).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "prepfs/cache/sample_residency.h"
#include "prepfs/core/control_fs.h"
#include "prepfs/core/view_paths.h"
#include "prepfs/index/sample_list.h"
#include "prepfs/partition/job_knowledge.h"

namespace prepfs {

std::string render_samples(const SampleList& samples, const Tree& tree, const ViewPaths& paths);
std::string render_resident(const SampleList& samples, const SampleResidency& residency);

// `published` runs after each write that published accesses (the prefetcher's wake-up); `owner`
// is the writer's job_owner_suffix (job_knowledge.h): each user's job names are their own.
std::unique_ptr<ControlFs::WriteSession> open_order_session(JobKnowledge& knowledge, const ViewPaths& paths,
                                                            std::function<void()> published, std::string owner = "");
std::unique_ptr<ControlFs::WriteSession> open_importance_session(JobKnowledge& knowledge, const SampleList& samples,
                                                                 const ViewPaths& paths);

}  // namespace prepfs

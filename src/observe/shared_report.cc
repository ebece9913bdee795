#include "prepfs/observe/shared_report.h"

#include <fmt/format.h>

#include <string_view>

#include "prepfs/common/size.h"

namespace prepfs {

std::string shared_plan_text(SharedTier* shared, bool forms_fixed, const std::string& auto_why) {
  if (!shared) return "";
  std::string forms;
  for (Form f : kAllForms)
    if (shared->shares(f)) forms += (forms.empty() ? "" : ", ") + std::string(form_name(f));
  std::string out = "\nShared tier (memcached):\n";
  out += fmt::format("  forms shared: {} ({})\n", forms.empty() ? "none" : forms,
                     forms_fixed ? "shared_forms= fixes them" : "auto; a variant of augmented/ is never shared");
  if (!forms_fixed) {
    std::string_view why = auto_why;
    while (!why.empty()) {  // indented under the forms
      const size_t eol = why.find('\n');
      out += "    " + std::string(why.substr(0, eol)) + "\n";
      why = eol == std::string_view::npos ? std::string_view() : why.substr(eol + 1);
    }
  }
  const SharedCounters& c = shared->counters();
  const uint64_t gets = load(c.gets), get_ns = load(c.get_ns), hit_bytes = load(c.hit_bytes), hit_ns = load(c.hit_ns);
  if (gets > 0)
    out += fmt::format("  measured: {} lookups, {:.3f} ms each on average", gets, double(get_ns) / 1e6 / double(gets));
  else
    out += "  measured: no lookup yet";
  if (hit_ns > 0) out += fmt::format(", {:.1f} MB/s over the entries found", double(hit_bytes) * 1e3 / double(hit_ns));
  out += "\n";
  for (Form f : kAllForms) {
    const SharedCounters::PerForm& p = c.by_form[index_of(f)];
    if (load(p.hits) + load(p.misses) + load(p.errors) == 0) continue;
    out += fmt::format("  {}: {} hits, {} misses filled here, {} published, {} lease waits, {} corrupt, {} errors\n",
                       form_name(f), load(p.hits), load(p.misses), load(p.published), load(p.lease_waits),
                       load(p.corrupt), load(p.errors));
  }
  for (const KvServerState& s : shared->store().servers())
    out += fmt::format("  server {}: {}, {} items, {} of {} memory{}\n", s.name, s.up ? "up" : "skipped after a failure",
                       s.items, format_size(s.used_bytes), format_size(s.memory_bytes),
                       s.extstore_bytes ? ", extstore " + format_size(s.extstore_bytes) : "");
  out += "  not modelled yet: the placement above does not count the shared tier's capacity\n";
  return out;
}

}  // namespace prepfs

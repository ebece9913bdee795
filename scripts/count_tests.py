#!/usr/bin/python3
"""The test command's closing line: test cases, not meson entries.

    scripts/count_tests.py BUILD_DIR [BUILD_DIR...]

Reads each build's meson-logs/testlog.json. A meson test that runs gtest or pytest is counted by
its cases (gtest's "[  PASSED  ] N tests." summary, pytest's "N passed, M skipped in Xs" line);
any other meson test is one case. A meson test that failed without its runner reporting a failed
case (a crash, a timeout, a non-zero exit after the summary) adds one failed case; a meson SKIP
with no skipped case reported is one skipped case.

Prints "tests: N passed, N failed, N skipped" alone on its last line (what it counted over, and
any skipped tests, on the lines before). Exits 1 when anything failed, and, under
CI=true, when anything was skipped: the project's scripts install everything the tests need, so
a skip on CI means something is missing.
"""
import json
import os
import re
import sys

GTEST = {
    "passed": re.compile(r"^\[  PASSED  \] (\d+) tests?\.", re.M),
    "failed": re.compile(r"^\[  FAILED  \] (\d+) tests?, listed below", re.M),
    "skipped": re.compile(r"^\[  SKIPPED \] (\d+) tests?, listed below", re.M),
}
PYTEST_LINE = re.compile(r"^=*\s*(\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected).*) in [\d.]+s", re.M)
PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def cases(stdout):
    """(passed, failed, skipped) reported by the runner, or None when it reported nothing."""
    found = None
    for kind, rx in GTEST.items():
        for m in rx.finditer(stdout):
            found = found or {"passed": 0, "failed": 0, "skipped": 0}
            found[kind] += int(m.group(1))
    for line in PYTEST_LINE.finditer(stdout):
        found = found or {"passed": 0, "failed": 0, "skipped": 0}
        for n, kind in PYTEST_COUNT.findall(line.group(1)):
            key = {"error": "failed", "errors": "failed", "xfailed": "passed", "xpassed": "failed"}.get(kind, kind)
            found[key] += int(n)
    return found


def main():
    total = {"passed": 0, "failed": 0, "skipped": 0}
    entries = 0
    skipped_names = []
    for build in sys.argv[1:]:
        path = os.path.join(build, "meson-logs", "testlog.json")
        if not os.path.exists(path):
            print(f"count_tests: {path} is missing: the tests of {build} did not run")
            total["failed"] += 1
            continue
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                entries += 1
                c = cases(r.get("stdout") or "")
                result = r["result"]
                if c is None:
                    c = {"passed": int(result in ("OK", "EXPECTEDFAIL")), "failed": 0, "skipped": int(result == "SKIP")}
                    if result not in ("OK", "EXPECTEDFAIL", "SKIP"):
                        c["failed"] = 1
                elif result not in ("OK", "EXPECTEDFAIL", "SKIP") and c["failed"] == 0:
                    c["failed"] = 1
                elif result == "SKIP" and c["skipped"] == 0:
                    c["skipped"] = 1  # skipped whole (exit 77) after cases that passed
                if c["skipped"]:
                    skipped_names.append(f"{os.path.basename(build)}: {r['name']} ({c['skipped']})")
                for k in total:
                    total[k] += c[k]
    if skipped_names:
        print("skipped in: " + "; ".join(skipped_names))
    skips_fail = total["skipped"] and os.environ.get("CI") == "true"
    if skips_fail:
        print("count_tests: skips fail the run under CI=true (scripts/install-deps.sh installs everything)")
    # The counts alone on the last line: the plain closing line a CI reads.
    print(f"test cases in {entries} meson tests over {len(sys.argv) - 1} builds:")
    print(f"tests: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if total["failed"] or skips_fail else 0


if __name__ == "__main__":
    sys.exit(main())

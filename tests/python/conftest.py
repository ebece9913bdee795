"""The unit tests of the Python package run against the INSTALLED copy (what a training job
imports), never the source tree: a package that imports from tools/python/ but was installed
incompletely, or not at all, would otherwise pass here and fail in the field.

Set PREPFS_TEST_SOURCE_TREE=1 to run them against tools/python/ while editing (PYTHONPATH=tools/python).
"""
import filecmp
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# No example database: it would be written into the source tree, and CI starts from scratch anyway.
# No deadline: the first call into torch in a process is slow, which is not what these tests time.
settings.register_profile("prepfs", database=None, deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("prepfs")

SOURCE = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "tools", "python", "prepfs"))


def _installed_problem():
    try:
        import prepfs
    except ImportError as e:
        return f"{sys.executable} cannot import prepfs ({e}): run `meson install -C build` first"
    where = os.path.realpath(os.path.dirname(prepfs.__file__))
    if os.environ.get("PREPFS_TEST_SOURCE_TREE") == "1":
        return None
    if where == SOURCE:
        return (f"import prepfs resolves to the source tree ({where}), not an installed copy: run the tests "
                "from tests/python without PYTHONPATH, after `meson install -C build`")
    sources = sorted(f for f in os.listdir(SOURCE) if f.endswith(".py"))
    stale = [f for f in sources if not os.path.exists(os.path.join(where, f))
             or not filecmp.cmp(os.path.join(SOURCE, f), os.path.join(where, f), shallow=False)]
    if stale:
        return f"the installed prepfs at {where} differs from the source in {', '.join(stale)}: run `meson install -C build`"
    return None


def pytest_configure(config):
    problem = _installed_problem()
    if problem:
        pytest.exit(f"prepfs tests: {problem}", returncode=1)

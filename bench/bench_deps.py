"""What the benchmarks need beyond the test suite, checked before a bench starts: a bench must not
run for minutes and then fail at its report (python3-matplotlib, for the plots, is not a test
dependency). Missing packages are installed with scripts/install-deps.sh bench when run as root."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    script = os.path.join(REPO, "scripts", "install-deps.sh")
    if os.geteuid() != 0:
        sys.exit(f"python3-matplotlib is missing (for the plots): run `{script} bench` as root, or this bench as root")
    print("bench: installing the bench packages (scripts/install-deps.sh bench)", file=sys.stderr, flush=True)
    subprocess.run([script, "bench"], check=True, stdin=subprocess.DEVNULL)
    import importlib
    importlib.invalidate_caches()
    import matplotlib  # noqa: F401,F811  (fails loudly if the install did not provide it)

"""What the benchmarks need, checked before a bench starts: a bench must not run for minutes and
then fail at an import or at its report (python3-matplotlib, for the plots, is not a test
dependency; torch, torchvision, PIL and numpy are). ensure_modules() checks any Python modules and
installs the missing ones with scripts/install-deps.sh when run as root, or stops with a message
that says what to install."""
import importlib
import importlib.util
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Debian packages of the Python modules the benches import (all in scripts/install-deps.sh's lists:
# matplotlib in "bench", the others in "test").
DEBIAN = {"matplotlib": "python3-matplotlib", "numpy": "python3-numpy", "PIL": "python3-pil",
          "torch": "python3-torch", "torchvision": "python3-torchvision"}
# Modules no Debian package provides: how to get them.
HOWTO = {"prepfs": "the prepfs Python package, tools/python: `meson install -C BUILD_DIR`, "
                   "or PYTHONPATH=tools/python"}


def _missing(modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def ensure_modules(modules, install=None, why=""):
    """Checks before a bench starts that each of `modules` (top-level names) can be imported; nothing
    is imported here. When some are missing and `install` names a set of scripts/install-deps.sh
    ("test", "bench") that provides them, it installs that set if run as root; otherwise the bench
    stops with a message that names what is missing and how to get it. install=None never installs
    (for a child process: its parent checks and installs)."""
    missing = _missing(modules)
    if not missing:
        return
    script = os.path.join(REPO, "scripts", "install-deps.sh")
    prog = os.path.basename(sys.argv[0]) or "bench"
    pkgs = sorted({DEBIAN[m] for m in missing if m in DEBIAN})
    other = [m for m in missing if m not in DEBIAN]
    if install and pkgs and not other and os.geteuid() == 0:
        print(f"{prog}: installing {' '.join(pkgs)} (scripts/install-deps.sh {install})", file=sys.stderr, flush=True)
        subprocess.run([script, install], check=True, stdin=subprocess.DEVNULL)
        importlib.invalidate_caches()
        missing = _missing(modules)
        if not missing:
            return
        pkgs = sorted({DEBIAN[m] for m in missing if m in DEBIAN})
        other = [m for m in missing if m not in DEBIAN]
    lines = [f"{prog}: cannot start: missing Python module(s) {', '.join(missing)} for {sys.executable}"
             + (f" ({why})" if why else "")]
    if pkgs:
        lines.append(f"  Debian packages {' '.join(pkgs)}: run `{script} {install or 'test'}` as root"
                     + (", or this bench as root" if install and os.geteuid() != 0 else "")
                     + f" (or apt-get install {' '.join(pkgs)})")
    for m in other:
        lines.append(f"  {m}: {HOWTO.get(m, 'not packaged for Debian')}")
    sys.exit("\n".join(lines))


def ensure_matplotlib():
    ensure_modules(["matplotlib"], install="bench", why="for the plots")

"""CPU time of a process, read from /proc/PID/stat: the benches' CPU-per-item columns."""
import os

TICKS = os.sysconf("SC_CLK_TCK")
_RAISE = object()


def cpu_seconds(pid, children=False, default=_RAISE):
    """User + system CPU seconds of process `pid` so far; with `children`, plus those of its
    children it has reaped. `default` when the process is gone or its stat unreadable (without
    one, the error is raised)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        # utime, stime (and cutime, cstime): fields 14-17 of proc(5), 11-14 after the name
        return sum(int(x) for x in fields[11:15 if children else 13]) / TICKS
    except (OSError, IndexError, ValueError):
        if default is _RAISE:
            raise
        return default

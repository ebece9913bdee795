"""The command line: clear one-line errors, clean unmounts, background mode."""
import errno
import os
import signal
import subprocess
import time

import pytest

from prepfs_harness import PREPFS_BIN, Prepfs, SlowFs, assert_one_clear_line, force_unmount, is_mounted, wait_for


def run(*args, timeout=30):
    return subprocess.run([PREPFS_BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout)




@pytest.fixture
def dirs(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x").write_text("x")
    (tmp_path / "mnt").mkdir()
    return tmp_path


def test_help_reads_well():
    res = run("--help")
    assert res.returncode == 0
    for key in ("SOURCE", "MOUNTPOINT", "-o", "--config", "ram=SIZE", "ssd=SIZE", "ssd_dir=DIR", "Examples"):
        assert key in res.stdout, key


def test_missing_source(dirs):
    assert_one_clear_line(run(dirs / "nope", dirs / "mnt", "-f", "-o", f"ssd_dir={dirs}/ssd"), "source", "nope")


def test_missing_mountpoint(dirs):
    assert_one_clear_line(run(dirs / "src", dirs / "nomnt", "-f", "-o", f"ssd_dir={dirs}/ssd"), "mountpoint", "nomnt")


def test_busy_mountpoint(dirs):
    subprocess.run(["mount", "-t", "tmpfs", "none", str(dirs / "mnt")], check=True)
    try:
        assert_one_clear_line(run(dirs / "src", dirs / "mnt", "-f", "-o", f"ssd_dir={dirs}/ssd"), "busy")
    finally:
        force_unmount(str(dirs / "mnt"))


def test_unwritable_ssd_dir(dirs):
    assert_one_clear_line(run(dirs / "src", dirs / "mnt", "-f", "-o", "ssd_dir=/proc/prepfs-cannot"), "ssd_dir")
    assert not is_mounted(str(dirs / "mnt"))


def test_unparsable_size(dirs):
    res = run(dirs / "src", dirs / "mnt", "-f", "-o", "ram=lots")
    assert_one_clear_line(res, "ram", "lots")
    assert res.returncode == 2


def test_a_metrics_address_that_is_no_numeric_address_is_a_usage_error_before_the_scan(dirs):
    # It used to pass option parsing and fail only after the source was scanned and mounted
    # (exit 1, and under systemd five such scans).
    res = run(dirs / "src", dirs / "mnt", "-f", "-o", f"ssd_dir={dirs}/ssd,metrics_addr=localhost:9100")
    assert_one_clear_line(res, "metrics_addr", "numeric")
    assert res.returncode == 2
    assert not is_mounted(str(dirs / "mnt"))
    assert not (dirs / "ssd").exists() or not any((dirs / "ssd").iterdir()), "the source was scanned"


def test_unknown_option(dirs):
    assert_one_clear_line(run(dirs / "src", dirs / "mnt", "-o", "colour=blue"), "colour")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_unmounts_cleanly(dirs, sig):
    # In a with: a failed check still stops the daemon and unmounts (stop() after its own exit
    # only unmounts what it left).
    with Prepfs(dirs / "src", dirs / "mnt", dirs / "ssd") as fs:
        assert is_mounted(fs.mnt)
        fs.proc.send_signal(sig)
        assert fs.proc.wait(timeout=20) == 0
        assert not is_mounted(fs.mnt) and not is_mounted(os.path.join(fs.mnt, ".prepfs"))
        assert "stopped cleanly" in fs.log_text()


def test_background_mode_returns_once_mounted(dirs):
    res = run(dirs / "src", dirs / "mnt", "-o", f"ssd_dir={dirs}/ssd")
    try:
        assert res.returncode == 0, res.stderr
        assert is_mounted(str(dirs / "mnt"))  # mounted and answering when the command returns
        assert open(dirs / "mnt" / "raw" / "x").read() == "x"
        pid = int(subprocess.run(["pgrep", "-f", f"{PREPFS_BIN} {dirs}/src"], capture_output=True,
                                 text=True).stdout.split()[0])
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not is_mounted(str(dirs / "mnt")), what="background daemon to unmount")
    finally:
        force_unmount(str(dirs / "mnt") + "/.prepfs")
        force_unmount(str(dirs / "mnt"))


def test_options_before_the_paths_as_fuse_tools_take_them(dirs):
    """`prepfs -o ram=8M SRC MNT`: -o took every word after it, so the paths were options."""
    res = run("-o", f"ssd_dir={dirs}/ssd", "-o", "ram=8M", dirs / "src", dirs / "mnt")
    try:
        assert res.returncode == 0, res.stderr
        assert open(dirs / "mnt" / "raw" / "x").read() == "x"
        import json
        assert json.load(open(dirs / "mnt" / ".prepfs" / "stats"))["ram"]["budget"] == 8 * 2**20
    finally:
        force_unmount(str(dirs / "mnt") + "/.prepfs")
        force_unmount(str(dirs / "mnt"))
        subprocess.run(["pkill", "-f", f"{PREPFS_BIN} -o ssd_dir={dirs}/ssd"])


def test_background_mode_reports_errors(dirs):
    res = run(dirs / "src", dirs / "nomnt", "-o", f"ssd_dir={dirs}/ssd")
    assert res.returncode == 1
    assert "nomnt" in res.stderr


def test_config_file_and_override(dirs):
    conf = dirs / "p.conf"
    conf.write_text(f"source = {dirs}/src\nmountpoint = {dirs}/mnt\nram = 8M\nssd_dir = {dirs}/ssd\n")
    proc = subprocess.Popen([PREPFS_BIN, "--config", str(conf), "-f", "-o", "ram=4M"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: os.path.exists(dirs / "mnt" / ".prepfs" / "stats"), what="mount")
        import json
        assert json.load(open(dirs / "mnt" / ".prepfs" / "stats"))["ram"]["budget"] == 4 * 2**20
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        force_unmount(str(dirs / "mnt"))


def test_second_mount_of_same_cache_is_refused(dirs):
    (dirs / "mnt2").mkdir()
    with Prepfs(dirs / "src", dirs / "mnt", dirs / "ssd"):
        assert_one_clear_line(run(dirs / "src", dirs / "mnt2", "-f", "-o", f"ssd_dir={dirs}/ssd"), "in use")


def test_bare_boolean_flags_mount_like_fstab_writes_them(dirs):
    # An fstab line says "crop_decode,fast_paths", not "crop_decode=1,fast_paths=1".
    with Prepfs(dirs / "src", dirs / "mnt", dirs / "ssd", "crop_decode,fast_paths") as fs:
        assert open(fs.raw("x")).read() == "x"
    assert_one_clear_line(run(dirs / "src", dirs / "mnt", "-f", "-o", f"ssd_dir={dirs}/ssd,nocrop_decode"),
                          "nocrop_decode")


def test_a_dead_mount_left_by_a_killed_daemon_is_detached_by_the_next_start(dirs):
    # A daemon killed outright leaves its three mounts behind, dead: a request that reaches the
    # daemon gets ENOTCONN (a stat may still be answered from cached attributes). The next start
    # used to refuse them ("busy", or "dead FUSE mount"), so every systemd restart failed until
    # someone unmounted by hand.
    first = Prepfs(dirs / "src", dirs / "mnt", dirs / "ssd")
    try:
        first.proc.kill()
        first.proc.wait()
        with pytest.raises(OSError) as dead:
            os.statvfs(dirs / "mnt")
        assert dead.value.errno == errno.ENOTCONN
        with Prepfs(dirs / "src", dirs / "mnt", dirs / "ssd") as again:
            assert open(again.raw("x")).read() == "x"
            assert "detached a dead prepfs mount" in again.log_text()
    finally:
        first.stop()
    assert not is_mounted(str(dirs / "mnt")) and not is_mounted(str(dirs / "mnt" / ".prepfs"))


def test_a_dead_mount_that_is_not_prepfs_is_left_to_the_user(dirs):
    slow = SlowFs(dirs / "src", dirs / "mnt")
    try:
        slow.proc.kill()
        slow.proc.wait()
        res = run(dirs / "src", dirs / "mnt", "-f", "-o", f"ssd_dir={dirs}/ssd")
        assert_one_clear_line(res, "mountpoint", "mnt")
        assert is_mounted(str(dirs / "mnt")), "someone else's dead mount was detached"
    finally:
        slow.stop()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--bogus"], ["bogus"]),  # CLI11 gave 109
        (["extra-argument"], ["extra-argument"]),
        (["-o"], ["-o"]),  # CLI11 gave 114
        (["-o", "augment=rrc(224"], ["augment"]),  # was found by the daemon, after the checks: 1
    ],
)
def test_every_usage_error_exits_2_before_the_source_is_touched(dirs, args, words):
    # Status 2 is documented for usage errors, and the service unit does not restart on it
    # (RestartPreventExitStatus=2): a typo must not scan the source five times.
    res = run(dirs / "src", dirs / "mnt", "-f", *args, "-o", f"ssd_dir={dirs}/ssd")
    assert res.returncode == 2, res.stderr
    for w in words:
        assert w in res.stderr, res.stderr
    assert not is_mounted(str(dirs / "mnt"))
    assert not (dirs / "ssd").exists(), "the source was scanned"


def test_help_and_version_exit_0():
    for flag in ("--help", "--version"):
        res = run(flag)
        assert res.returncode == 0, (flag, res.stderr)
        assert "prepfs" in res.stdout


def abort_connections_under(path):
    """Ends the FUSE connections of the mounts at or below path (fusectl), so a daemon stuck on its
    own mount can exit, and unmounts them."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(path) or fields[4].startswith(str(path) + "/"):
                minor = fields[2].split(":")[1]
                try:
                    with open(f"/sys/fs/fuse/connections/{minor}/abort", "w") as a:
                        a.write("1")
                except OSError:
                    pass
    force_unmount(str(path))


def test_a_daemon_killed_as_its_mount_becomes_ready_exits(dirs):
    # The daemon checks that its new mount answers with a stat of it. Made by the daemon itself,
    # that stat's request, once handed to the workers, was waited for uninterruptibly: killed at
    # that moment (a harness seeing the mount answer, systemd giving up), the process kept waiting
    # for workers that were gone, held its /dev/fuse descriptors, and stayed stuck with its mount.
    # The kill comes as the mount first answers, where the daemon's own check is in flight too.
    stuck = answered = 0
    for i in range(25):
        proc = subprocess.Popen([PREPFS_BIN, str(dirs / "src"), str(dirs / "mnt"), "-f", "-o",
                                 f"ssd_dir={dirs}/ssd{i},log_level=warn"], stderr=subprocess.DEVNULL)
        try:
            # A tight loop, not wait_for's sleeps: the kill must come while the daemon's own stat
            # may still be in flight.
            stats, deadline = str(dirs / "mnt" / ".prepfs" / "stats"), time.monotonic() + 20
            while not os.path.exists(stats) and proc.poll() is None and time.monotonic() < deadline:
                pass
            answered += os.path.exists(stats)
            proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stuck += 1
        finally:
            abort_connections_under(dirs / "mnt")
            proc.kill()
            proc.wait(timeout=10)
    # Every kill must have come as the mount answered: a daemon that failed to start, or never
    # answered, would count as "not stuck" without ever meeting the race.
    assert answered == 25, f"only {answered} of 25 mounts answered before the kill"
    assert stuck == 0, f"{stuck} of 25 daemons killed as their mount became ready did not exit"


def test_a_stop_signal_while_starting_ends_it_at_once(tmp_path):
    """A stop signal while the daemon starts (a first scan of a large source takes minutes) was
    left pending until the mount was up: Ctrl-C did nothing, and `systemctl stop` waited for its
    SIGKILL. Nothing is mounted yet, so the process now ends at once, saying so."""
    src, slow, mnt = tmp_path / "src", tmp_path / "slow", tmp_path / "mnt"
    for d in (src, slow, mnt):
        d.mkdir()
    for i in range(400):
        (src / f"f{i:03d}").write_text("x")
    # 50 ms per metadata request: the scan's 400 stats take about 20 s.
    with SlowFs(src, slow, "--meta-latency-ms", "50"):
        proc = subprocess.Popen([PREPFS_BIN, str(slow), str(mnt), "-f", "-o", f"ssd_dir={tmp_path}/ssd"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1)
            assert proc.poll() is None, proc.communicate()
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == -signal.SIGINT, err  # ended by the signal, as systemd expects of a stop
    assert "while starting: stopped before anything was mounted" in err, err
    assert took < 10, f"the signal waited {took:.1f} s: for the scan to end"
    assert not is_mounted(str(mnt))


def test_sighup_is_logged_and_changes_nothing(dirs):
    """SIGHUP has nothing to reload: it is logged (by the main thread, which owns the logger once
    the mount is up) and the mount goes on serving."""
    with Prepfs(dirs / "src", dirs / "mnt", dirs / "ssd") as fs:
        fs.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: nothing to reload" in fs.log_text(), timeout=10, what="the SIGHUP's log line")
        assert fs.proc.poll() is None
        with open(fs.raw("x")) as f:
            assert f.read() == "x"

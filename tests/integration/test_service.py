"""prepfs as a system service: sd_notify, mount(8)/fstab, config files, prepctl, metrics, the unit
file and the manual pages. Everything runs against real mounts and real processes."""
import json
import math
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from prepfs_harness import PREPFS_BIN, Prepfs, assert_one_clear_line, drop_page_cache, force_unmount, help_option_keys, is_mounted, sha256_file, wait_for, world_reachable_mountpoint

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
PREPCTL = os.environ.get("PREPCTL", os.path.join(TOP, "tools", "prepctl"))
MAN = os.path.join(TOP, "man")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepctl(*args, check=True, timeout=120, **kw):
    res = subprocess.run([sys.executable, PREPCTL, *map(str, args)], capture_output=True, text=True,
                         timeout=timeout, **kw)
    if check:
        assert res.returncode == 0, res.stderr
    return res


@pytest.fixture
def env(tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "c").mkdir()
    files = {}
    for i, rel in enumerate(["a/x.bin", "a/b/y.bin", "c/z.bin", "top.bin"]):
        data = os.urandom(150_000 + 70_000 * i)
        (src / rel).write_bytes(data)
        files[rel] = data
    (tmp_path / "mnt").mkdir()
    return tmp_path, src, files


# ------------------------------------------------------------------------------------ sd_notify

def test_sd_notify_ready_after_the_mount_answers_and_stopping_on_sigterm(env):
    tmp, src, files = env
    sock_path = str(tmp / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    mnt = str(tmp / "mnt")
    proc = subprocess.Popen([PREPFS_BIN, str(src), mnt, "-f", "-o", f"ssd_dir={tmp}/ssd"],
                            env={**os.environ, "NOTIFY_SOCKET": sock_path},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        messages = []
        deadline = time.time() + 30
        while not any("READY=1" in m for m in messages):
            assert time.time() < deadline, f"no READY=1 (got {messages})"
            assert proc.poll() is None, "prepfs exited before READY=1"
            r, _, _ = select.select([sock], [], [], 0.5)
            if r:
                msg = sock.recv(4096).decode()
                # At the moment READY=1 arrives the whole mount must already answer.
                if "READY=1" in msg:
                    assert is_mounted(mnt)
                    with open(os.path.join(mnt, ".prepfs", "stats")) as f:
                        json.load(f)
                    assert sha256_file(os.path.join(mnt, "raw", "a", "x.bin")) == sha256_file(src / "a" / "x.bin")
                messages.append(msg)
        ready = next(m for m in messages if "READY=1" in m)
        assert "STATUS=serving" in ready, ready
        proc.send_signal(signal.SIGTERM)
        stopping = None
        deadline = time.time() + 30
        while stopping is None and time.time() < deadline:
            r, _, _ = select.select([sock], [], [], 0.5)
            if r:
                msg = sock.recv(4096).decode()
                if "STOPPING=1" in msg:
                    stopping = msg
        assert stopping is not None, "no STOPPING=1 after SIGTERM"
        assert proc.wait(timeout=30) == 0
        assert not is_mounted(mnt) and not is_mounted(os.path.join(mnt, ".prepfs"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        force_unmount(os.path.join(mnt, ".prepfs"))
        force_unmount(os.path.join(mnt, "augmented"))
        force_unmount(mnt)


# ------------------------------------------------------------------------------ mount(8), fstab

MOUNT_SCRIPT = r"""
set -eu
# mount(8) runs helpers with a fixed PATH; make this build's prepfs the one mount.fuse3 finds,
# in this private mount namespace only.
mount --bind "$BIN" /usr/local/sbin
{mount_cmd}
echo "mounted"
cmp "$SRC/a/x.bin" "$MNT/raw/a/x.bin"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$MNT/.prepfs/stats"
grep -F " $MNT " /proc/self/mountinfo | grep -q "fuse.prepfs"
cat /proc/self/mountinfo | grep -F "$MNT" | awk '{{print $5}}' > "$TMP/mounts.txt"
umount -R "$MNT"
# Unmounting from outside ends the daemon too.
for i in $(seq 1 100); do
  pgrep -f -- "ssd_dir=$SSD" >/dev/null || {{ echo "daemon gone"; exit 0; }}
  sleep 0.1
done
echo "daemon still running" >&2
for pid in $(pgrep -f -- "ssd_dir=$SSD"); do kill -9 "$pid"; done
exit 1
"""


def run_in_mount_namespace(tmp, src, mount_cmd):
    if not shutil.which("unshare") or not shutil.which("mount.fuse3"):
        pytest.skip("SKIP: needs unshare(1) and mount.fuse3 (fuse3 package)")
    bindir = tmp / "bin"
    bindir.mkdir()
    os.symlink(os.path.abspath(PREPFS_BIN), bindir / "prepfs")
    env = {**os.environ, "BIN": str(bindir), "SRC": str(src), "MNT": str(tmp / "mnt"), "SSD": str(tmp / "ssd"),
           "TMP": str(tmp)}
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                          MOUNT_SCRIPT.format(mount_cmd=mount_cmd)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "mounted" in res.stdout and "daemon gone" in res.stdout, res.stdout + res.stderr
    mounts = (tmp / "mounts.txt").read_text().split()
    assert set(mounts) == {str(tmp / "mnt"), str(tmp / "mnt" / ".prepfs"), str(tmp / "mnt" / "augmented")}, mounts


def test_mount_t_fuse_prepfs_with_generic_options(env):
    tmp, src, _ = env
    # mount.fuse3 runs "prepfs SRC MNT -o ram=8M,ssd_dir=..,rw,dev,suid" (it drops _netdev/nofail
    # itself, and adds rw/dev/suid): all of it must be accepted.
    run_in_mount_namespace(tmp, src, 'mount -t fuse.prepfs "$SRC" "$MNT" -o "ram=8M,ssd_dir=$SSD,_netdev,nofail,noatime"')


def test_fstab_line(env):
    tmp, src, _ = env
    (tmp / "fstab").write_text(
        f"# prepfs test\n{src}  {tmp}/mnt  fuse.prepfs  ram=8M,ssd=16M,ssd_dir={tmp}/ssd,_netdev,nofail,"
        f"x-systemd.automount,noauto  0  0\n")
    run_in_mount_namespace(tmp, src, 'mount -T "$TMP/fstab" "$MNT"')


# --------------------------------------------------------------------------------- config files

def test_config_file_gives_source_mountpoint_and_keys(env):
    tmp, src, _ = env
    conf = tmp / "x.conf"
    conf.write_text(f"# a service config\nsource = {src}\nmountpoint = {tmp}/mnt\n\n"
                    f"ram = 8M   # comment\nssd = 16M\nssd_dir = {tmp}/ssd\neviction = random\n")
    proc = subprocess.Popen([PREPFS_BIN, "--config", str(conf), "-f", "-o", "ssd=32M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: proc.poll() is not None or os.path.exists(tmp / "mnt" / ".prepfs" / "stats"), what="mount")
        assert proc.poll() is None
        st = json.load(open(tmp / "mnt" / ".prepfs" / "stats"))
        assert st["ram"]["budget"] == 8 << 20    # from the file
        assert st["ssd"]["budget"] == 32 << 20   # -o overrides the file
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        force_unmount(str(tmp / "mnt"))


def test_positional_arguments_override_the_config_file(env):
    tmp, src, _ = env
    (tmp / "other").mkdir()
    conf = tmp / "x.conf"
    conf.write_text(f"source = /nonexistent\nmountpoint = {tmp}/other\nssd_dir = {tmp}/ssd\n")
    with Prepfs(src, tmp / "mnt", tmp / "ssd", extra_args=("--config", str(conf))) as fs:
        assert sorted(os.listdir(fs.raw())) == ["a", "c", "top.bin"]
        assert not is_mounted(str(tmp / "other"))


@pytest.mark.parametrize("line,words", [
    ("colour = blue", ["colour", ":3:"]),
    ("ram = lots", ["ram", "lots", ":3:"]),
    ("ram", ["ram", "needs a value", ":3:"]),
    ("metrics_addr = nowhere", ["metrics_addr", ":3:"]),
])
def test_config_errors_name_file_line_and_key(env, line, words):
    tmp, src, _ = env
    conf = tmp / "bad.conf"
    conf.write_text(f"source = {src}\nmountpoint = {tmp}/mnt\n{line}\n")
    res = subprocess.run([PREPFS_BIN, "--config", str(conf), "-f"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2, res.stderr
    assert_one_clear_line(res, str(conf), *words)
    assert not is_mounted(str(tmp / "mnt"))


def test_missing_config_file_is_a_clear_error(env):
    tmp, _, _ = env
    res = subprocess.run([PREPFS_BIN, "--config", str(tmp / "nope.conf"), "-f"], capture_output=True, text=True)
    assert res.returncode == 2 and "nope.conf" in res.stderr


# ------------------------------------------------------------------------------------- prepctl

def test_prepctl_stats_table_and_json(env):
    tmp, src, files = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        for rel in files:
            sha256_file(fs.raw(rel))
        table = prepctl(fs.mnt, "stats").stdout
        for word in ("RAM", "SSD", "hits", "misses", "hit rate", "evictions", "used / budget", "decoded", "source"):
            assert word in table, table
        st = json.loads(prepctl(fs.mnt, "stats", "--json").stdout)
        assert st["source"]["bytes"] >= sum(len(d) for d in files.values())
        # Any path inside the mount finds it.
        assert "hits" in prepctl(fs.raw("a"), "stats").stdout
        bad = prepctl(tmp, "stats", check=False)
        assert bad.returncode == 2 and "not in a prepfs mount" in bad.stderr


def test_prepctl_warmup_fills_the_cache_and_is_quiet_without_a_tty(env):
    tmp, src, files = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        # The kernel may keep pages of earlier reads; warmup must still reach the daemon.
        sha256_file(fs.raw("top.bin"))
        prepctl(fs.mnt, "evict", "-q")
        res = prepctl(fs.mnt, "warmup", "a", "top.bin")
        assert res.stdout == "" and res.stderr == ""
        st = fs.stats()
        warmed = len(files["a/x.bin"]) + len(files["a/b/y.bin"]) + len(files["top.bin"])
        assert st["ram"]["bytes_by_form"]["raw"] == warmed
        # --list, with paths in the mount and in the source, and a missing one reported.
        lst = tmp / "list.txt"
        lst.write_text(f"# comment\n{fs.raw('c/z.bin')}\n{src}/a/x.bin\nnot/there.bin\n")
        res = prepctl(fs.mnt, "warmup", "--list", lst, check=False)
        assert res.returncode == 1 and "not/there.bin" in res.stderr, res.stderr
        assert fs.stats()["ram"]["bytes_by_form"]["raw"] == sum(len(d) for d in files.values())
        # Now everything is served from RAM: no source reads.
        before = fs.stats()["source"]["reads"]
        drop_page_cache()
        for rel, data in files.items():
            with open(fs.raw(rel), "rb") as f:
                assert f.read() == data
        assert fs.stats()["source"]["reads"] == before


def test_prepctl_takes_names_that_are_no_utf8_a_closed_stdin_and_a_symlinked_mount(env):
    """Each was a Python traceback, or a path refused as outside the mount."""
    tmp, src, _ = env
    odd = b"caf\xe9.bin"  # Latin-1, not UTF-8
    with open(os.path.join(os.fsencode(src), odd), "wb") as f:
        f.write(b"latin")
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        lst, order = tmp / "odd.txt", tmp / "order.txt"
        lst.write_bytes(odd + b"\n")
        order.write_bytes(b"raw/" + odd + b"\n")
        for args, stdin in (((fs.mnt, "warmup", "--list", lst), None),
                            ((fs.mnt, "warmup", "--list", "-"), odd + b"\n"),
                            ((fs.mnt, "order", order, "--job", "odd"), None)):
            res = subprocess.run([sys.executable, PREPCTL, *map(str, args)], capture_output=True, timeout=60,
                                 input=stdin, env={**os.environ, "LC_ALL": "C.UTF-8"})
            assert res.returncode == 0 and b"Traceback" not in res.stderr, (args, res.stderr)
        assert fs.stats()["jobs"]["list"][0]["pending"] == 1  # the order named the file
        # warmup --list - with stdin closed: one clear line.
        res = subprocess.run([sys.executable, PREPCTL, fs.mnt, "warmup", "--list", "-"], capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
        assert res.returncode == 2 and "standard input is closed" in res.stderr and "Traceback" not in res.stderr, \
            res.stderr
        # The mount reached through a symlink.
        os.symlink(fs.mnt, tmp / "link")
        prepctl(fs.mnt, "evict", "-q")
        prepctl(fs.mnt, "warmup", os.path.join(tmp / "link", "raw", "top.bin"))
        assert fs.stats()["ram"]["bytes_by_form"]["raw"] > 0


def test_prepctl_warmup_progress_bar_on_a_tty(env):
    tmp, src, _ = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(sys.executable, [sys.executable, PREPCTL, fs.mnt, "warmup", "."])
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        text = out.decode(errors="replace")
        assert os.WEXITSTATUS(status) == 0, text
        assert re.search(r"\[#+\] 100\.0%", text), text
        assert "4/4 files" in text and "/s" in text and "ETA" in text, text


def test_prepctl_warmup_decoded_form(env):
    tmp, src, _ = env
    PIL = pytest.importorskip("PIL.Image")
    for i in range(3):
        PIL.new("RGB", (64 + i, 48), (i * 40, 100, 200)).save(src / "c" / f"img{i}.jpg", quality=90)
    # Warming reads through a view; what is kept follows the partition, here decoded in RAM.
    with Prepfs(src, tmp / "mnt", tmp / "ssd", "partition=fixed:0/100/0") as fs:
        prepctl(fs.mnt, "warmup", "--form", "decoded", "c")
        st = fs.stats()
        assert st["transform"]["decoded"] == 3
        assert st["ram"]["bytes_by_form"]["decoded"] == sum(
            os.path.getsize(os.path.join(fs.mnt, "decoded", "c", f"img{i}.ppm")) for i in range(3))
        # A non-image named explicitly is reported, not silently dropped.
        res = prepctl(fs.mnt, "warmup", "--form", "decoded", "c/z.bin", check=False)
        assert res.returncode == 1 and "not an image" in res.stderr


def test_prepctl_evict_empties_both_tiers(env):
    tmp, src, files = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd", options="ssd=64M") as fs:
        prepctl(fs.mnt, "warmup", ".")
        fs_stats = fs.stats()
        assert fs_stats["ram"]["bytes"] > 0
        wait_for(lambda: fs.stats()["ssd"]["bytes"] > 0, what="SSD writes")
        out = prepctl(fs.mnt, "evict").stdout
        assert out.startswith("evicted "), out
        st = fs.stats()
        for tier in ("ram", "ssd"):
            assert st[tier]["bytes"] == 0 and st[tier]["entries"] == 0, st[tier]
        # Entries are files named <key>-<r|d|a>: none may be left on disk.
        left = [n for _, _, names in os.walk(tmp / "ssd") for n in names if re.search(r"^[0-9a-f]{32}-[rda]$", n)]
        assert not left, left
        # The next read is a miss that goes to the source again.
        before = st["source"]["bytes"]
        drop_page_cache()
        assert sha256_file(fs.raw("top.bin")) == sha256_file(src / "top.bin")
        assert fs.stats()["source"]["bytes"] - before >= len(files["top.bin"])


def as_nobody(shell_command):
    """Runs a shell command as uid/gid 65534 with no supplementary groups."""
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", shell_command],
                          capture_output=True, text=True, timeout=30)


def cached_bytes(st):
    return {tier: (st[tier]["entries"], st[tier]["bytes"]) for tier in ("ram", "ssd")}


def test_control_files_stay_read_only_except_evict(env):
    tmp, src, files = env
    import errno
    # allow_other on a mountpoint every user can reach: the unprivileged evict below must be
    # refused by evict's own mode, not by the mount or by the path to it.
    with world_reachable_mountpoint("prepfs-ctl-") as mnt, Prepfs(src, mnt, tmp / "ssd", "allow_other") as fs:
        ctl = os.path.join(fs.mnt, ".prepfs")
        assert set(os.listdir(ctl)) >= {"stats", "metrics", "evict"}
        attempts = {
            "write stats": lambda: open(os.path.join(ctl, "stats"), "w"),
            "truncate metrics": lambda: os.truncate(os.path.join(ctl, "metrics"), 0),
            "create": lambda: open(os.path.join(ctl, "new"), "w"),
            "mkdir": lambda: os.mkdir(os.path.join(ctl, "d")),
            "unlink": lambda: os.unlink(os.path.join(ctl, "evict")),
            "chmod": lambda: os.chmod(os.path.join(ctl, "evict"), 0o666),
        }
        for name, attempt in attempts.items():
            with pytest.raises(OSError) as e:
                attempt()
            assert e.value.errno == errno.EROFS, name
        assert os.stat(os.path.join(ctl, "evict")).st_mode & 0o777 == 0o200
        # A warm cache, settled (SSD writes are queued), so that an eviction would show.
        for rel in files:
            sha256_file(fs.raw(rel))
        wait_for(lambda: fs.stats()["ssd"]["entries"] == len(files), what="SSD writes")
        before = cached_bytes(fs.stats())
        assert before["ram"][1] >= sum(map(len, files.values())), before
        # The unprivileged user reaches the control files: it reads stats (mode 0444)...
        res = as_nobody(f"cat {ctl}/stats")
        assert res.returncode == 0, res.stderr
        assert cached_bytes(json.loads(res.stdout)) == before
        # ...but cannot evict (default_permissions, mode 0200, owner root), and nothing is evicted.
        res = as_nobody(f"echo 1 > {ctl}/evict")
        assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
        assert cached_bytes(fs.stats()) == before
        # The same write by root evicts: the check above would see an eviction.
        with open(os.path.join(ctl, "evict"), "w") as f:
            f.write("1\n")
        assert cached_bytes(fs.stats()) == {"ram": (0, 0), "ssd": (0, 0)}


def test_prepctl_plan_prints_the_models_reasoning(env):
    tmp, src, _ = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        res = prepctl(fs.mnt, "plan", check=False)
        assert res.returncode == 0, res.stderr
        plan = open(os.path.join(fs.mnt, ".prepfs", "plan")).read()
        assert res.stdout == plan
        for k in ("partition=auto", "measured inputs", "placement", "predicted throughput", "single-form alternatives"):
            assert k in plan, (k, plan)
        res = prepctl(fs.mnt, "plan", "--json")
        doc = json.loads(res.stdout)
        assert doc["mode"] == "auto" and doc["plans"] >= 1, doc
        assert set(doc["placement"]) == {"raw", "decoded", "augmented"}, doc
        assert {"no cache", "all raw", "all decoded", "all augmented"} == set(doc["alternatives"]), doc


# ------------------------------------------------------------------------------------- metrics

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_strict(text):
    """A strict parser of the text format 0.0.4: every sample belongs to the family declared just
    before it with HELP and TYPE; names, labels and values are well formed; counters end in _total;
    histograms have cumulative buckets ending in +Inf equal to _count. Returns {(name, labels): value}."""
    assert text.endswith("\n")
    samples, families, current = {}, {}, None
    for line in text.splitlines():
        assert line, "empty line"
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in families, f"family {name} declared twice"
            current = name
            families[name] = None
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            assert name == current and typ in ("counter", "gauge", "histogram"), line
            families[name] = typ
            if typ == "counter":
                assert name.endswith("_total"), name
            continue
        assert not line.startswith("#"), line
        m = SAMPLE.match(line)
        assert m, f"bad sample line: {line!r}"
        name, labels_text, value = m.group(1), m.group(3), m.group(4)
        typ = families.get(current)
        allowed = {current} if typ != "histogram" else {current + s for s in ("_bucket", "_sum", "_count")}
        assert name in allowed, f"{name} outside its family {current}"
        labels = ()
        if labels_text:
            pos, parsed = 0, []
            while pos < len(labels_text):
                lm = LABEL.match(labels_text, pos)
                assert lm, f"bad labels in {line!r}"
                parsed.append((lm.group(1), lm.group(2)))
                pos = lm.end()
            labels = tuple(parsed)
        v = float(value)
        assert not math.isnan(v)
        if typ in ("counter", "histogram") and not name.endswith("_sum"):
            assert v >= 0 and v == int(v), line
        key = (name, labels)
        assert key not in samples, f"duplicate sample {line}"
        samples[key] = v
    for name, typ in families.items():
        assert typ, f"{name} has HELP but no TYPE"
        if typ == "histogram":
            buckets = [(dict(l)["le"], v) for (n, l), v in samples.items() if n == name + "_bucket"]
            assert buckets[-1][0] == "+Inf"
            values = [v for _, v in buckets]
            assert values == sorted(values), f"{name} buckets are not cumulative"
            assert [float(le) for le, _ in buckets[:-1]] == sorted(float(le) for le, _ in buckets[:-1])
            assert samples[(name + "_count", ())] == values[-1]
    return samples


def check_metrics(text, files):
    s = parse_strict(text)
    try:  # the reference parser too, where Debian's python3-prometheus-client is installed
        from prometheus_client.parser import text_string_to_metric_families
        names = {f.name for f in text_string_to_metric_families(text)}
        assert {"prepfs_cache_hits", "prepfs_source_read_seconds"} <= names, names
    except ImportError:
        pass
    assert s[("prepfs_form_requests_total", (("form", "raw"), ("result", "miss")))] >= len(files)
    assert s[("prepfs_source_read_seconds_count", ())] >= len(files)
    assert s[("prepfs_source_bytes_total", ())] >= sum(len(d) for d in files.values())
    for tier in ("ram", "ssd"):
        for key in ("prepfs_cache_hits_total", "prepfs_cache_misses_total", "prepfs_cache_evictions_total",
                    "prepfs_cache_hit_bytes_total"):
            assert (key, (("tier", tier),)) in s
        for form in ("raw", "decoded", "augmented"):
            assert ("prepfs_cache_bytes", (("tier", tier), ("form", form))) in s
    for key in ("prepfs_ssd_write_queue_bytes", "prepfs_transform_cpu_seconds_total", "prepfs_cache_joined_total"):
        assert (key, ()) in s, key
    return s


def test_metrics_file_and_http_are_valid_prometheus_text(env):
    tmp, src, files = env
    port = free_port()
    try:
        fs = Prepfs(src, tmp / "mnt", tmp / "ssd", options=f"metrics_addr=127.0.0.1:{port}")
    except RuntimeError as e:
        if "without libmicrohttpd" in str(e):
            pytest.skip("SKIP: this prepfs was built without libmicrohttpd (-Dmetrics_http)")
        raise
    with fs:
        for rel in files:
            sha256_file(fs.raw(rel))
        drop_page_cache()
        for rel in files:
            sha256_file(fs.raw(rel))
        with open(os.path.join(fs.mnt, ".prepfs", "metrics")) as f:
            s = check_metrics(f.read(), files)
        assert s[("prepfs_form_requests_total", (("form", "raw"), ("result", "ram_hit")))] >= len(files)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            check_metrics(r.read().decode(), files)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=10)
        assert e.value.code == 404
    # The endpoint goes with the mount.
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_metrics_addr_in_use_is_a_clear_error(env):
    tmp, src, _ = env
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run([PREPFS_BIN, str(src), str(tmp / "mnt"), "-f", "-o",
                              f"ssd_dir={tmp}/ssd,metrics_addr=127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "metrics_addr" in res.stderr and str(port) in res.stderr, res.stderr
    assert not is_mounted(str(tmp / "mnt"))


# --------------------------------------------------------------------------- unit file, manuals

def test_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("SKIP: systemd-analyze is not installed (scripts/install-deps.sh test)")
    built = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(PREPFS_BIN))), "systemd", "prepfs@.service")
    text = open(built).read() if os.path.exists(built) else open(os.path.join(TOP, "systemd", "prepfs@.service")).read()
    # The unit names the installed binary; point it at this build so verify can check it.
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={os.path.abspath(PREPFS_BIN)}", text, flags=re.M)
    assert "@SBINDIR@" not in text and "@SERVICE_TYPE@" not in text
    unit = tmp_path / "prepfs@.service"
    unit.write_text(text)
    shutil.copy(unit, tmp_path / "prepfs@test.service")
    res = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / "prepfs@test.service")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 0 and res.stderr.strip() == "", res.stderr
    for needed in ("Type=notify", "Restart=on-failure", "DeviceAllow=/dev/fuse rw", "/etc/prepfs/%i.conf",
                   "AssertPathExists=", "EnvironmentFile=-/etc/prepfs/%i.env", "RestartPreventExitStatus=2"):
        assert needed in text, needed
    # A mount namespace would hide the FUSE mount from the host.
    settings = "\n".join(l for l in text.splitlines() if not l.startswith("#"))
    for hiding in ("PrivateTmp=yes", "ProtectSystem=", "ProtectHome=", "PrivateDevices=yes", "PrivateMounts=yes",
                   "ProtectKernelModules=yes", "ProtectKernelLogs=yes", "ProtectControlGroups=yes"):
        assert hiding not in settings, hiding




def test_every_option_is_in_prepfs_conf_5():
    text = open(os.path.join(MAN, "prepfs.conf.5")).read()
    for key in help_option_keys() + ["source", "mountpoint"]:
        assert re.search(rf"^\.B(I)? {key}(=|\s|$)", text, re.M), f"{key} is not documented in prepfs.conf.5"


def test_every_prepctl_command_is_in_prepctl_1():
    text = open(os.path.join(MAN, "prepctl.1")).read()
    usage = prepctl("--help", check=False).stdout
    for cmd in ("stats", "warmup", "evict", "plan"):
        assert cmd in usage
        assert re.search(rf"^\.B {cmd}$", text, re.M), f"{cmd} is not documented in prepctl.1"
    for opt in ("--json", "--list", "--form", "--jobs", "--progress", "--quiet"):
        assert opt.replace("-", "\\-") in text, opt


@pytest.mark.parametrize("page", ["prepfs.8", "prepfs.conf.5", "prepctl.1"])
def test_man_pages_render_without_warnings(page):
    if not shutil.which("groff"):
        pytest.skip("SKIP: groff is not installed")
    res = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(MAN, page)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr

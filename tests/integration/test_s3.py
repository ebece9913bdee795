"""The S3 source against a real S3-protocol server (npm's s3rver) on 127.0.0.1.

The server is installed by the test itself (s3rver_harness.ensure_s3rver) and skipped with the
reason when that is impossible. Objects are uploaded with plain HTTP PUTs, then mounted as
s3://bucket/ds through prepfs and read through raw/ and decoded/.
"""
import errno
import hashlib
import io
import os
import random
import subprocess
import threading
import time

import pytest
from PIL import Image

import prepfs_harness as harness
from prepfs_harness import PREPFS_BIN, Prepfs, drop_page_cache, sha256_file
from s3rver_harness import ACCESS_KEY, SECRET_KEY, S3rver, free_port

BUCKET = "bucket"
BIG = 5 * 1048576 + 12345      # several MiB: many ranged GETs, chunk boundaries not aligned
HUGE = 24 * 1048576 + 7        # read while the server is killed and restarted


def make_objects():
    rng = random.Random(5)
    objs = {}
    for i in range(1100):  # more than one ListObjectsV2 page (1000 keys)
        objs[f"ds/many/{i:05d}.bin"] = rng.randbytes(rng.randint(0, 3000))
    objs["ds/deep/only/prefixes/leaf.bin"] = rng.randbytes(100)   # deep/ and deep/only/ hold only prefixes
    objs["ds/deep/only/prefixes/leaf2.bin"] = rng.randbytes(10)
    objs["ds/big.bin"] = rng.randbytes(BIG)
    objs["ds/huge.bin"] = rng.randbytes(HUGE)
    objs["ds/huge2.bin"] = rng.randbytes(3 * 1048576 + 1)
    objs["ds/class 01/f 1+2.jpg"] = rng.randbytes(5000)
    objs["ds/ünï/çødé.bin"] = rng.randbytes(7)
    objs["ds/both"] = b"object that is also a prefix"
    objs["ds/both/child.bin"] = b"child"
    objs["ds/empty.bin"] = b""
    objs["outside/not-mounted.bin"] = b"outside the prefix"
    # PIL is a test dependency (python3-pil, scripts/install-deps.sh test) of the python3 that
    # run_pytest.sh runs: the photo is always there, and the tests of decoded/ count on it.
    img = Image.new("RGB", (97, 61))
    img.putdata([(x * 3 % 256, y * 5 % 256, (x * y) % 256) for y in range(61) for x in range(97)])
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    objs["ds/img/photo.jpg"] = buf.getvalue()
    return objs


def expected_files(objs):
    """What raw/ must show: keys under ds/, minus the object shadowed by a prefix."""
    out = {k[len("ds/"):]: v for k, v in objs.items() if k.startswith("ds/")}
    del out["both"]
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3")
    srv = S3rver(d / "data")
    srv.create_bucket(BUCKET)
    objs = make_objects()
    srv.put_objects(BUCKET, objs)
    srv.objects = objs
    yield srv
    srv.close()


@pytest.fixture(autouse=True)
def credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


def s3_opts(server, extra=""):
    o = f"s3_endpoint={server.endpoint},s3_path_style=1,s3_region=us-east-1"
    return o + ("," + extra if extra else "")


@pytest.fixture
def mount(server, tmp_path):
    (tmp_path / "mnt").mkdir()
    m = Prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd", s3_opts(server))
    yield m
    m.stop()


def walk_files(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = p
    return out


def test_every_object_is_byte_identical(server, mount):
    want = expected_files(server.objects)
    got = walk_files(mount.raw())
    assert sorted(got) == sorted(want)
    for rel, data in want.items():
        assert os.stat(got[rel]).st_size == len(data), rel
        assert sha256_file(got[rel]) == hashlib.sha256(data).hexdigest(), rel
    log = mount.log_text()
    assert SECRET_KEY not in log and "Authorization" not in log


def test_listing_over_1000_keys(mount):
    names = os.listdir(mount.raw("many"))
    assert len(names) == 1100
    assert sorted(names)[0] == "00000.bin" and sorted(names)[-1] == "01099.bin"
    assert "listed 1" in mount.log_text()  # the scan logged its page count


def test_prefix_holding_only_prefixes(mount):
    assert os.listdir(mount.raw("deep")) == ["only"]
    assert os.listdir(mount.raw("deep/only")) == ["prefixes"]
    assert sorted(os.listdir(mount.raw("deep/only/prefixes"))) == ["leaf.bin", "leaf2.bin"]
    assert os.path.isdir(mount.raw("deep/only"))


def test_object_that_is_also_a_prefix_is_a_directory(mount):
    assert os.path.isdir(mount.raw("both"))
    assert os.listdir(mount.raw("both")) == ["child.bin"]
    assert "is also a prefix of other keys" in mount.log_text()
    assert not os.path.exists(mount.raw("../outside"))
    assert "outside" not in os.listdir(mount.mnt + "/raw")


def test_ranged_reads_of_a_large_object(server, mount):
    data = server.objects["ds/big.bin"]
    rng = random.Random(3)
    before = mount.stats()["source"]  # the mount's image probe has read file headers already
    with open(mount.raw("big.bin"), "rb", buffering=0) as f:
        for _ in range(60):
            off = rng.randrange(0, BIG)
            n = rng.choice([1, 4096, 65536, 1048576, 3 * 1048576])
            assert os.pread(f.fileno(), n, off) == data[off:off + n], (off, n)
        assert os.pread(f.fileno(), 100, BIG - 10) == data[-10:]
        assert os.pread(f.fileno(), 100, BIG + 10) == b""
    s = mount.stats()["source"]
    # Each 1 MiB chunk was fetched once, by a ranged GET: never the whole object per read.
    assert s["bytes"] - before["bytes"] <= BIG, (before, s)
    assert s["reads"] - before["reads"] <= (BIG >> 20) + 1, (before, s)


def test_concurrent_readers(server, mount):
    want = expected_files(server.objects)
    rels = [r for r in want if r.startswith("many/")][:400]
    errors = []

    def worker(part):
        try:
            for rel in part:
                with open(mount.raw(rel), "rb") as f:
                    assert f.read() == want[rel], rel
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(rels[i::32],)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_decoded_view_of_a_jpeg_from_s3(server, mount):
    data = server.objects["ds/img/photo.jpg"]
    with open(mount.mnt + "/decoded/img/photo.ppm", "rb") as f:
        ppm = f.read()
    img = Image.open(io.BytesIO(data)).convert("RGB")
    header = f"P6\n{img.width} {img.height}\n255\n".encode()
    assert ppm.startswith(header)
    assert ppm[len(header):] == img.tobytes()


def test_outage_mid_read_is_bridged_by_retries(server, tmp_path):
    """The server dies while a large uncached read is in flight and comes back: the read
    completes with the right bytes, cached files are served throughout, no remount."""
    (tmp_path / "mnt").mkdir()
    with Prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd", s3_opts(server, "s3_retry_time=30")) as m:
        cached = "class 01/f 1+2.jpg"
        with open(m.raw(cached), "rb") as f:
            assert f.read() == server.objects["ds/" + cached]
        result = {}

        def reader():
            try:
                result["sha"] = sha256_file(m.raw("huge.bin"))
            except OSError as e:
                result["err"] = e

        base = m.stats()["source"]["bytes"]
        t = threading.Thread(target=reader)
        t.start()
        deadline = time.time() + 10
        while m.stats()["source"]["bytes"] - base < 1048576 and time.time() < deadline and t.is_alive():
            time.sleep(0.005)
        log_at_kill = len(m.log_text())
        server.stop()  # SIGKILL, most likely mid-transfer
        try:
            # The read was in flight at the kill: still reading with the server gone, part of
            # huge.bin fetched, not all of it.
            assert t.is_alive(), result
            assert m.stats()["source"]["bytes"] - base < HUGE
            drop_page_cache()  # the cached file's next read asks the daemon
            t0 = time.monotonic()
            with open(m.raw(cached), "rb") as f:  # cached data stays up during the outage
                assert f.read() == server.objects["ds/" + cached]
            assert time.monotonic() - t0 < 2  # served from the cache, not held by the outage
            time.sleep(2)
        finally:
            server.start()  # also on a failure: the module's other tests share the server
        t.join(60)
        assert not t.is_alive()
        assert "err" not in result, result
        assert result["sha"] == hashlib.sha256(server.objects["ds/huge.bin"]).hexdigest()
        # The outage was bridged by retries, and the daemon said so.
        assert "retrying" in m.log_text()[log_at_kill:], m.log_text()[log_at_kill:][-2000:]


def test_outage_gives_eio_then_recovers_without_remount(server, tmp_path):
    (tmp_path / "mnt").mkdir()
    with Prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd", s3_opts(server, "s3_retry_time=1")) as m:
        rel = "huge2.bin"
        server.stop()
        try:
            t0 = time.time()
            with pytest.raises(OSError) as e:
                with open(m.raw(rel), "rb") as f:
                    f.read()
            assert e.value.errno == errno.EIO
            assert time.time() - t0 < 15
        finally:
            server.start()
        drop_page_cache()
        with open(m.raw(rel), "rb") as f:
            assert f.read() == server.objects["ds/" + rel]
        assert "retrying" in m.log_text()


def run_prepfs(source, mnt, ssd, opts, env=None, timeout=60):
    return subprocess.run([PREPFS_BIN, source, str(mnt), "-o", f"ssd_dir={ssd}," + opts],
                          capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_clear_line(res, *words):
    harness.assert_one_clear_line(res, *words)
    assert SECRET_KEY not in res.stderr


def test_wrong_bucket_is_one_clear_error(server, tmp_path):
    (tmp_path / "mnt").mkdir()
    res = run_prepfs("s3://no-such-bucket/ds", tmp_path / "mnt", tmp_path / "ssd", s3_opts(server))
    assert_one_clear_line(res, "no-such-bucket", "does not exist")


def test_wrong_endpoint_is_one_clear_error(server, tmp_path):
    (tmp_path / "mnt").mkdir()
    closed = free_port()
    t0 = time.time()
    res = run_prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd",
                     f"s3_endpoint=http://127.0.0.1:{closed},s3_path_style=1")
    assert_one_clear_line(res, f"127.0.0.1:{closed}", "cannot reach")
    assert time.time() - t0 < 20


def test_denied_credentials_are_one_clear_error_without_secrets(tmp_path):
    """s3rver does not check signatures, so a 403 comes from a tiny local server that denies
    everything; the point is the message: one line, EACCES wording, no secret in it."""
    import http.server

    class Deny(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b"<?xml version='1.0'?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error>"
            self.send_response(403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deny)
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    try:
        (tmp_path / "mnt").mkdir()
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDSECRETID123", AWS_SECRET_ACCESS_KEY="verysecretkey/abc",
                   AWS_SESSION_TOKEN="sessiontoken123")
        res = run_prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd",
                         f"s3_endpoint=http://127.0.0.1:{httpd.server_port}", env=env)
        assert_one_clear_line(res, "access denied", "SignatureDoesNotMatch")
        for secret in ("verysecretkey/abc", "sessiontoken123"):
            assert secret not in res.stderr and secret not in res.stdout
    finally:
        httpd.shutdown()


def test_a_deleted_object_reads_as_eio(server, tmp_path):
    key = "ds/vanishing.bin"
    server.put_objects(BUCKET, {key: b"here for now"})
    (tmp_path / "mnt").mkdir()
    try:
        with Prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd", s3_opts(server)) as m:
            status, _ = server.request("DELETE", f"/{BUCKET}/{key}")
            assert status == 204
            with pytest.raises(OSError) as e:
                with open(m.raw("vanishing.bin"), "rb") as f:
                    f.read()
            assert e.value.errno == errno.EIO  # a version change like any other, not ENOENT from read(2)
    finally:
        server.request("DELETE", f"/{BUCKET}/{key}")


@pytest.mark.parametrize("opts, owner", [("", (0, 0)), ("uid=23456,gid=23457", (23456, 23457))])
def test_objects_belong_to_the_mounting_user_or_to_uid_and_gid(server, tmp_path, opts, owner):
    (tmp_path / "mnt").mkdir()
    with Prepfs(f"s3://{BUCKET}/ds", tmp_path / "mnt", tmp_path / "ssd", s3_opts(server, opts)) as m:
        # A file, a directory (a prefix) and a derived view: os.stat raises if one is missing.
        for p in (m.raw("big.bin"), m.raw("deep"), os.path.join(m.mnt, "decoded", "img", "photo.ppm")):
            st = os.stat(p)
            assert (st.st_uid, st.st_gid) == owner, p
        st = os.stat(m.mnt)  # the mount itself: the mounting user (root here), whatever uid= says
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())

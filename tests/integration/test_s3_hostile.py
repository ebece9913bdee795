"""The S3 source against a hostile server (tests/integration/hostile_s3.py): every wait has a
bound. A trickling server cannot hold a reader forever; a listing whose continuation tokens cycle
fails with one clear error instead of listing forever."""
import errno
import os
import subprocess
import threading
import time

import pytest

from prepfs_harness import PREPFS_BIN, Prepfs, drop_page_cache, force_unmount
from hostile_s3 import HostileS3


@pytest.fixture(autouse=True)
def anonymous(monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def test_a_trickling_server_cannot_hold_a_reader_forever(tmp_path):
    (tmp_path / "mnt").mkdir()
    with HostileS3("trickle") as srv:
        opts = f"s3_endpoint={srv.endpoint},s3_path_style=1,s3_timeout=2,s3_retry_time=3"
        with Prepfs("s3://bucket/ds", tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
            srv.arm()
            result = {}

            def reader():
                t0 = time.time()
                try:
                    with open(fs.raw("slow.bin"), "rb") as f:
                        result["data"] = f.read()
                except OSError as e:
                    result["errno"] = e.errno
                result["seconds"] = time.time() - t0

            t = threading.Thread(target=reader, daemon=True)
            t.start()
            t.join(30)  # 1000 bytes at 2 B/s would take 500 s
            alive = t.is_alive()
            if alive:
                fs.stop()  # aborts the connection: the reader gets ENOTCONN and the test can end
                t.join(10)
            assert not alive, "the read was still waiting after 30 s"
            assert result.get("errno") == errno.EIO, result
            # One transfer (2 s) and retries within s3_retry_time (3 s), plus backoff.
            assert result["seconds"] < 12, result
            assert "timed out" in fs.log_text() or "Timeout" in fs.log_text()


def mount_that_must_fail(srv, tmp_path, timeout):
    """Runs a mount of the hostile server in the foreground; it must end (and fail) in time."""
    (tmp_path / "mnt").mkdir()
    args = [PREPFS_BIN, "s3://bucket/ds", str(tmp_path / "mnt"), "-f", "-o",
            f"ssd_dir={tmp_path}/ssd,s3_endpoint={srv.endpoint},s3_path_style=1"]
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        force_unmount(str(tmp_path / "mnt"))
        pytest.fail(f"still listing after {timeout} s ({srv.listings} pages)")
    assert res.returncode != 0
    assert "terminate called" not in res.stderr
    return res


def test_a_continuation_token_cycle_fails_the_listing(tmp_path):
    with HostileS3("cycle") as srv:
        res = mount_that_must_fail(srv, tmp_path, 30)
        errors = [l for l in res.stderr.splitlines() if " error: " in l or l.startswith("prepfs:")]
        assert errors and all("continuation token" in l for l in errors), res.stderr
        assert srv.listings < 10


@pytest.mark.parametrize("fault,why", [("same_keys", "out of order"), ("empty_pages", "empty pages in a row"),
                                       ("long_token", "continuation token of 1000000 bytes"),
                                       ("same_page", "a page of keys listed before"),
                                       ("wide_page", "1001 keys in one page")])
def test_a_listing_that_never_ends_fails_the_mount_with_a_clear_error(tmp_path, fault, why):
    """Only a repeated token used to end a listing: a server handing out new tokens forever held
    the mount, and grew its memory (every token kept, every page's keys), without end. Then only
    each page's first key was checked to rise, which a page sent again with its keys descending
    passed; and a page could hold a million keys where a thousand were asked for."""
    with HostileS3(fault) as srv:
        res = mount_that_must_fail(srv, tmp_path, 60)
        assert why in res.stderr and "the listing is incomplete" in res.stderr, res.stderr
        assert srv.listings <= 1001


@pytest.mark.parametrize("fault,why", [("no_etag", "answered without an ETag"),
                                       ("folded_etag", "changed since it was listed"),
                                       ("star_range", "does not place its bytes")])
def test_a_get_reply_that_does_not_prove_the_listed_version_is_refused(tmp_path, fault, why):
    """Without an ETag the bytes could be any version of the object of the same size; a read
    checked the size alone and served (and cached) them. Then a read compared the reply's ETag with
    the 30 bits of its hash folded into the version's mtime only: a same-size rewrite whose ETag
    agreed in those bits (one in a billion, or ground on purpose: an ETag is the MD5 of the bytes)
    was served, and cached, as the listed version. And a 206 whose Content-Range gave no start
    ("bytes */N") was taken to start where the request did."""
    (tmp_path / "mnt").mkdir()
    with HostileS3(fault) as srv:
        opts = f"s3_endpoint={srv.endpoint},s3_path_style=1,s3_timeout=2,s3_retry_time=1"
        with Prepfs("s3://bucket/ds", tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
            with open(os.path.join(fs.mnt, ".prepfs", "evict"), "w") as f:
                f.write("1")  # the mount's probe of the object cached its bytes
            drop_page_cache()
            srv.arm()
            with pytest.raises(OSError) as e:
                with open(fs.raw("slow.bin"), "rb") as f:
                    f.read()
            assert e.value.errno == errno.EIO
            assert why in fs.log_text()


@pytest.mark.parametrize("fault", ["bare_head", "far_head"])
def test_a_head_reply_without_a_version_keeps_the_version_the_mount_has(tmp_path, fault):
    """A HEAD answered without Content-Length, Last-Modified or ETag tells no version. It used to
    be taken as size 0 and time 0: a revalidation saw a change, and the file was served empty.
    Nor does one whose Last-Modified is past 2262: its nanoseconds wrapped around."""
    (tmp_path / "mnt").mkdir()
    with HostileS3(fault) as srv:
        opts = f"s3_endpoint={srv.endpoint},s3_path_style=1,s3_timeout=2,s3_retry_time=3,metadata_ttl=0"
        with Prepfs("s3://bucket/ds", tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
            srv.arm()
            assert os.stat(fs.raw("slow.bin")).st_size == 1000
            with open(fs.raw("slow.bin"), "rb") as f:
                assert f.read() == b"x" * 1000
            assert "its version is unknown" in fs.log_text()


def test_a_listed_size_past_int64_is_skipped_with_a_warning(tmp_path):
    """A Size of 2^64 - 1 was taken as is: st_size turned negative, and the offsets of reads with
    it. The key is skipped (one warning) and the others are served."""
    (tmp_path / "mnt").mkdir()
    with HostileS3("huge_size") as srv:
        opts = f"s3_endpoint={srv.endpoint},s3_path_style=1,s3_timeout=2,s3_retry_time=1"
        with Prepfs("s3://bucket/ds", tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
            assert sorted(os.listdir(os.path.join(fs.mnt, "raw"))) == ["a.bin"]
            with open(fs.raw("a.bin"), "rb") as f:
                assert f.read() == b"x" * 1000
            assert "a size past 2^63 - 1 bytes" in fs.log_text()


def test_a_gateway_that_ignores_max_keys_is_listed_whole(tmp_path):
    """A page of more keys than asked for that says no more follow ends the listing: it is a
    gateway that sends the whole bucket at once, not one that lists forever."""
    (tmp_path / "mnt").mkdir()
    with HostileS3("whole_bucket") as srv:
        opts = f"s3_endpoint={srv.endpoint},s3_path_style=1,s3_timeout=2,s3_retry_time=1"
        with Prepfs("s3://bucket/ds", tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
            assert len(os.listdir(os.path.join(fs.mnt, "raw"))) == 1001

"""MountClient against control files written in the daemon's formats into a temporary directory.

This tests the parsing and the writing, not the daemon: the files here are plain files, which is
also why the order and importance files can be read back to see exactly what a daemon would get.
"""
import os

import pytest

from prepfs import MountClient, ProtocolError, Resident


@pytest.fixture
def mount(tmp_path):
    ctl = tmp_path / ".prepfs"
    ctl.mkdir()
    for name in ("order", "importance"):
        (ctl / name).write_bytes(b"")
    return tmp_path


def write(mount, name, data: bytes):
    (mount / ".prepfs" / name).write_bytes(data)


def read(mount, name) -> bytes:
    return (mount / ".prepfs" / name).read_bytes()


# --------------------------------------------------------------------------------------- samples

def test_samples_are_read_by_index(mount):
    write(mount, "samples", b"train/a/1.JPEG\ttrain/a/1.ppm\n"
                            b"train/b/2.JPEG\ttrain/b/2.ppm\n"
                            b"val/c/3.JPEG\tval/c/3.npy\n")
    assert MountClient(mount).samples() == [("train/a/1.JPEG", "train/a/1.ppm"), ("train/b/2.JPEG", "train/b/2.ppm"),
                                            ("val/c/3.JPEG", "val/c/3.npy")]


def test_samples_without_a_final_newline_and_empty(mount):
    write(mount, "samples", b"x.JPEG\tx.ppm")
    assert MountClient(mount).samples() == [("x.JPEG", "x.ppm")]
    write(mount, "samples", b"")
    assert MountClient(mount).samples() == []


def test_sample_paths_keep_spaces_and_undecodable_bytes(mount):
    # File names are bytes on Linux; Python's os functions hand them out with surrogateescape,
    # so that is what they must be compared with.
    write(mount, "samples", b"train/my class/\xff.JPEG\ttrain/my class/\xff.ppm\n")
    (raw, image), = MountClient(mount).samples()
    assert raw == os.fsdecode(b"train/my class/\xff.JPEG") and image == os.fsdecode(b"train/my class/\xff.ppm")


@pytest.mark.parametrize("bad", [b"no-tab-here", b"a\tb\tc", b"\tb", b"a\t", b""])
def test_a_malformed_samples_line_is_named_with_its_number(mount, bad):
    write(mount, "samples", b"ok.JPEG\tok.ppm\n" + bad + b"\nok2.JPEG\tok2.ppm\n")
    with pytest.raises(ProtocolError, match="line 2"):
        MountClient(mount).samples()


def test_missing_samples_file_is_an_oserror(tmp_path):
    c = MountClient(tmp_path)
    assert not c.present()
    with pytest.raises(FileNotFoundError):
        c.samples()


# -------------------------------------------------------------------------------------- resident

def test_resident_bitmap_is_lsb_first(mount):
    # byte 0 = 0b00000101: samples 0 and 2; byte 1 = 0b10000000: sample 15; byte 2: sample 16.
    write(mount, "resident", bytes([0b00000101, 0b10000000, 0b00000001]))
    r = MountClient(mount).resident()
    assert [i for i in range(24) if i in r] == [0, 2, 15, 16]
    assert r.count() == 4
    assert -1 not in r and 24 not in r and 10**9 not in r  # outside the bitmap: not cached


def test_resident_of_every_single_bit(mount):
    n = 37
    for k in range(n):
        data = bytearray((n + 7) // 8)
        data[k // 8] |= 1 << (k % 8)
        write(mount, "resident", bytes(data))
        r = MountClient(mount).resident()
        assert [i for i in range(n) if i in r] == [k]


def test_resident_object_is_a_snapshot():
    data = bytearray([1])
    r = Resident(data)
    data[0] = 0
    assert 0 in r


# ----------------------------------------------------------------------------------------- order

def test_publish_writes_job_reset_and_paths(mount):
    c = MountClient(mount)
    c.publish("train-1", ["raw/train/a/1.JPEG", "decoded/train/a/2.ppm"], reset=True)
    c.publish("train-1", ["augmented/train/b/3.ppm"])
    c.end("train-1")
    assert read(mount, "order").decode() == ("job train-1\nreset\nraw/train/a/1.JPEG\ndecoded/train/a/2.ppm\n"
                                             "job train-1\naugmented/train/b/3.ppm\n"
                                             "job train-1\nend\n")


def test_publish_writes_whole_lines_in_bounded_chunks(mount, monkeypatch):
    import prepfs.mount
    calls = []
    real_write = os.write

    def spy(fd, data):
        calls.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(prepfs.mount.os, "write", spy)
    c = MountClient(mount)
    c.CHUNK = 200
    paths = [f"decoded/train/c{i % 7}/img_{i:05d}.ppm" for i in range(100)]
    c.publish("j", paths, reset=True)
    assert len(calls) > 1  # the batch was cut...
    assert all(b.endswith(b"\n") and len(b) <= 200 for b in calls)  # ...at line ends, within the bound
    assert b"".join(calls) == read(mount, "order") == ("job j\nreset\n" + "".join(p + "\n" for p in paths)).encode()
    # and one write per chunk, not one per line
    assert len(calls) == pytest.approx(len(read(mount, "order")) / 200, abs=2)


def test_a_line_longer_than_a_chunk_is_written_whole(mount, monkeypatch):
    import prepfs.mount
    calls = []
    real_write = os.write
    monkeypatch.setattr(prepfs.mount.os, "write", lambda fd, d: calls.append(bytes(d)) or real_write(fd, d))
    c = MountClient(mount)
    c.CHUNK = 16
    c.publish("j", ["raw/" + "x" * 40 + ".JPEG"])
    assert calls == [b"job j\n", b"raw/" + b"x" * 40 + b".JPEG\n"]


@pytest.mark.parametrize("job", ["", "a b", "a/b", "x" * 65, "caf\u00e9", "a\nb"])
def test_publish_rejects_bad_job_names(mount, job):
    with pytest.raises(ValueError, match="job name"):
        MountClient(mount).publish(job, ["raw/x.JPEG"])
    assert read(mount, "order") == b""


@pytest.mark.parametrize("path", ["/abs/raw/x.JPEG", "raw/a\nb.JPEG", ""])
def test_publish_rejects_paths_that_would_break_the_line_protocol(mount, path):
    with pytest.raises(ValueError, match="order path"):
        MountClient(mount).publish("j", [path])


def test_writes_never_create_a_missing_control_file(tmp_path):
    (tmp_path / ".prepfs").mkdir()
    c = MountClient(tmp_path)
    with pytest.raises(FileNotFoundError):
        c.publish("j", ["raw/x.JPEG"])
    with pytest.raises(FileNotFoundError):
        c.report_importance([(1, 0.5)])
    assert os.listdir(tmp_path / ".prepfs") == []


def test_write_errors_reach_the_caller(mount):
    os.remove(mount / ".prepfs" / "order")
    os.symlink("/dev/full", mount / ".prepfs" / "order")
    with pytest.raises(OSError) as e:
        MountClient(mount).publish("j", ["raw/x.JPEG"])
    assert e.value.errno == 28  # ENOSPC: the sampler, not the client, decides to carry on


# ------------------------------------------------------------------------------------ importance

def test_importance_lines(mount):
    MountClient(mount).report_importance([(0, 1.5), (17, 0.0), (3, 2.25e-7), (4, 12345678.0)])
    lines = read(mount, "importance").decode().splitlines()
    assert [l.split(" ")[0] for l in lines] == ["0", "17", "3", "4"]
    assert [float(l.split(" ")[1]) for l in lines] == [1.5, 0.0, pytest.approx(2.25e-7), 12345678.0]


@pytest.mark.parametrize("pair", [(-1, 1.0), (1, -0.5), (1, float("nan")), (1, float("inf"))])
def test_importance_rejects_what_the_format_does_not_allow(mount, pair):
    with pytest.raises(ValueError):
        MountClient(mount).report_importance([pair])

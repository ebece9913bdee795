"""decoded/ and augmented/ on a real mount, checked against PIL and a real PyTorch DataLoader."""
import io
import os
import struct
import subprocess
import time

import numpy as np
import pytest
from PIL import Image

from prepfs_harness import Prepfs, gen_images, wait_for



@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds")
    gen_images(root / "src", 4, 12)
    train = root / "src" / "train"
    cls = sorted(os.listdir(train))[0]
    # Bad inputs next to good ones: none of them may crash or stall the daemon.
    good = sorted(os.listdir(train / cls))[0]
    data = (train / cls / good).read_bytes()
    (train / cls / "truncated.jpg").write_bytes(data[: len(data) // 2])
    corrupt = bytearray(data)
    for i in range(len(data) // 3, len(data) // 3 + 200):
        corrupt[i] = 0x00 if i % 2 else 0xFF
    (train / cls / "corrupt.jpg").write_bytes(bytes(corrupt))
    # A real file whose frame header is patched to claim 60000 x 60000 pixels (3.6 GP).
    huge = bytearray(data)
    sof = next(i for i in range(2, len(huge) - 9) if huge[i] == 0xFF and huge[i + 1] in (0xC0, 0xC1, 0xC2))
    huge[sof + 5:sof + 9] = struct.pack(">HH", 60000, 60000)
    (train / cls / "huge.jpg").write_bytes(bytes(huge))
    (train / cls / "empty.jpg").write_bytes(b"")
    (train / cls / "notes.txt").write_text("not an image")
    (root / "mnt").mkdir()
    return root


def images(src):
    out = []
    for dirpath, _, names in os.walk(src):
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                head = f.read(3)
            if head == b"\xff\xd8\xff" and n not in ("truncated.jpg", "corrupt.jpg", "huge.jpg"):
                out.append(os.path.relpath(p, src))
    return sorted(out)


def view_path(mnt, view, rel, ext="ppm"):
    return os.path.join(mnt, view, rel.rsplit(".", 1)[0] + "." + ext)


def test_decoded_equals_pil_for_every_image(dataset):
    src = dataset / "src"
    with Prepfs(src, dataset / "mnt", dataset / "ssd-dec") as fs:
        rels = images(src)
        assert len(rels) == 48
        for rel in rels:
            expect = Image.open(src / rel).convert("RGB")
            p = view_path(fs.mnt, "decoded", rel)
            data = open(p, "rb").read()
            assert os.stat(p).st_size == len(data), rel  # stat() is exact
            assert data == b"P6\n%d %d\n255\n" % expect.size + expect.tobytes(), rel
        listed = set(os.listdir(os.path.join(fs.mnt, "decoded", os.path.dirname(rels[0]))))
        assert "notes.ppm" not in listed and "empty.ppm" not in listed
        assert {"truncated.ppm", "corrupt.ppm", "huge.ppm"} <= listed  # headers look valid


def test_decoded_npy_equals_numpy(dataset):
    src = dataset / "src"
    with Prepfs(src, dataset / "mnt", dataset / "ssd-npy", "decoded_format=npy") as fs:
        for rel in images(src)[:10]:
            arr = np.asarray(Image.open(src / rel).convert("RGB"))
            buf = io.BytesIO()
            np.save(buf, arr)
            assert open(view_path(fs.mnt, "decoded", rel, "npy"), "rb").read() == buf.getvalue(), rel
            aug = np.load(view_path(fs.mnt, "augmented", rel, "npy"))
            assert aug.shape == (224, 224, 3) and aug.dtype == np.uint8


def test_bad_jpegs_give_eio_and_raw_still_serves(dataset):
    src = dataset / "src"
    cls = sorted(os.listdir(src / "train"))[0]
    with Prepfs(src, dataset / "mnt", dataset / "ssd-bad") as fs:
        for name in ("truncated", "corrupt", "huge"):
            for view in ("decoded", "augmented"):
                p = os.path.join(fs.mnt, view, "train", cls, name + ".ppm")
                with pytest.raises(OSError) as e:
                    open(p, "rb").read()
                assert e.value.errno == 5, (view, name)  # EIO
            raw = os.path.join(fs.raw("train"), cls, name + ".jpg")
            assert open(raw, "rb").read() == (src / "train" / cls / (name + ".jpg")).read_bytes()
        # The daemon still serves good files afterwards, and logged each bad one.
        good = images(src)[0]
        assert len(open(view_path(fs.mnt, "decoded", good), "rb").read()) > 0
        log = fs.log_text()
        for name in ("truncated", "corrupt", "huge"):
            assert name + ".jpg" in log, name
        assert fs.stats()["transform"]["errors"] >= 3


def test_augmented_variants(dataset):
    src = dataset / "src"
    rel = images(src)[5]
    with Prepfs(src, dataset / "mnt", dataset / "ssd-aug", "seed=7") as fs:
        p = view_path(fs.mnt, "augmented", rel)
        assert os.stat(p).st_size == len(b"P6\n224 224\n255\n") + 224 * 224 * 3
        variants = [open(p, "rb").read() for _ in range(4)]
        assert all(len(v) == os.stat(p).st_size for v in variants)
        assert len(set(variants)) == 4, "each open must give the next variant"
        assert Image.open(io.BytesIO(variants[0])).size == (224, 224)
    # A remount with the same seed reproduces variant k (here k = 0..3, in open order).
    with Prepfs(src, dataset / "mnt", dataset / "ssd-aug2", "seed=7") as fs:
        again = [open(view_path(fs.mnt, "augmented", rel), "rb").read() for _ in range(4)]
        assert again == variants
    with Prepfs(src, dataset / "mnt", dataset / "ssd-aug3", "seed=8") as fs:
        assert open(view_path(fs.mnt, "augmented", rel), "rb").read() != variants[0]


def test_concurrent_opens_read_consistent_variants(dataset):
    src = dataset / "src"
    rel = images(src)[3]
    with Prepfs(src, dataset / "mnt", dataset / "ssd-conc") as fs:
        p = view_path(fs.mnt, "augmented", rel)
        a, b = open(p, "rb"), open(p, "rb")
        chunks_a, chunks_b = [], []
        while True:  # interleave small reads of the two handles
            x, y = a.read(4096), b.read(4096)
            if not x and not y:
                break
            chunks_a.append(x)
            chunks_b.append(y)
        va, vb = b"".join(chunks_a), b"".join(chunks_b)
        assert va != vb
        # Each handle read one whole, valid variant: reopening in a fresh mount gives the same two.
    with Prepfs(src, dataset / "mnt", dataset / "ssd-conc2") as fs:
        p = view_path(fs.mnt, "augmented", rel)
        assert {open(p, "rb").read(), open(p, "rb").read()} == {va, vb}


def test_aug_reuse_serves_each_variant_n_times(dataset):
    src = dataset / "src"
    rel = images(src)[1]
    # No render ahead: its renders of the next variant would add to the count.
    with Prepfs(src, dataset / "mnt", dataset / "ssd-reuse", "aug_reuse=3,render_ahead=0") as fs:
        p = view_path(fs.mnt, "augmented", rel)
        got = [open(p, "rb").read() for _ in range(6)]
        assert got[0] == got[1] == got[2] and got[3] == got[4] == got[5] and got[0] != got[3]
        s = fs.stats()["transform"]
        assert s["augmented"] == 2, s  # two variants rendered for six opens


def test_augmented_from_cached_decoded_skips_the_decode(dataset):
    src = dataset / "src"
    rel = images(src)[2]
    with Prepfs(src, dataset / "mnt", dataset / "ssd-fromdec", "fast_paths=0,seed=3,render_ahead=0") as fs:
        open(view_path(fs.mnt, "decoded", rel), "rb").read()
        v0 = open(view_path(fs.mnt, "augmented", rel), "rb").read()
        assert fs.stats()["transform"]["augmented_from_decoded"] == 1
    with Prepfs(src, dataset / "mnt", dataset / "ssd-fromsrc", "fast_paths=0,seed=3,ram=0,ssd=0") as fs:
        assert open(view_path(fs.mnt, "augmented", rel), "rb").read() == v0  # same pixels either way
        assert fs.stats()["transform"]["augmented_from_decoded"] == 0


def test_render_ahead_serves_the_same_variants_as_rendering_on_open(dataset):
    # Issue 13: with no order published, each serve renders the file's next variant ahead while a
    # cpu slot is idle. Every open must still get exactly the variant a daemon without render
    # ahead serves for that open (same seed), whether it was rendered ahead or not.
    src = dataset / "src"
    rels = images(src)[:4]
    got = {}
    for name, opts in (("ahead", "seed=5,aug_reuse=2"), ("plain", "seed=5,aug_reuse=2,render_ahead=0")):
        with Prepfs(src, dataset / "mnt", dataset / f"ssd-{name}", opts) as fs:
            got[name] = []
            for r in range(5):
                for rel in rels:
                    got[name].append(open(view_path(fs.mnt, "augmented", rel), "rb").read())
                if name == "ahead" and r % 2 == 1:
                    # Each file's variant r // 2 had its last serve: the next one is rendered ahead
                    # (or skipped), before the next round opens it. A fixed sleep came up short on
                    # a loaded machine.
                    queued = len(rels) * (r // 2 + 1)
                    wait_for(lambda: sum(fs.stats()["render_ahead"][k] for k in ("rendered", "skipped")) >= queued,
                             timeout=30, what=f"{queued} renders ahead done")
            ahead = fs.stats()["render_ahead"]
            if name == "ahead":
                assert ahead["used"] > 0 and ahead["rendered"] >= ahead["used"], ahead
            else:
                assert ahead["rendered"] == 0, ahead
    assert got["ahead"] == got["plain"]
    assert len(set(got["plain"])) == 3 * len(rels)  # variants 0, 1, 2 of each file: 5 opens, aug_reuse=2


def test_an_ioctl_is_answered_not_a_tty(dataset):
    # Python's open() asks isatty() (TCGETS) on every file: the answer must be ENOTTY, as from any
    # regular file, not ENOSYS.
    import errno
    import fcntl
    import termios
    rel = images(dataset / "src")[0]
    with Prepfs(dataset / "src", dataset / "mnt", dataset / "ssd-ioctl") as fs:
        for path in (view_path(fs.mnt, "augmented", rel), view_path(fs.mnt, "decoded", rel),
                     os.path.join(fs.mnt, "raw", rel)):
            with open(path, "rb") as f:
                with pytest.raises(OSError) as e:
                    fcntl.ioctl(f.fileno(), termios.TCGETS, bytes(64))
                assert e.value.errno == errno.ENOTTY, (path, e.value)
                assert not f.isatty()

def test_bad_augment_spec_is_a_clear_error(dataset):
    with pytest.raises(RuntimeError) as e:
        Prepfs(dataset / "src", dataset / "mnt", dataset / "ssd-spec", "augment=rrc(224;flip")
    assert "augment" in str(e.value)


LOADER = r"""
import sys, torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
root, kind = sys.argv[1], sys.argv[2]
norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
full = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), norm])
light = transforms.Compose([transforms.ToTensor(), norm])
ds = datasets.ImageFolder(root, transform=light if kind == "augmented" else full)
loader = DataLoader(ds, batch_size=8, num_workers=2, shuffle=False)
labels = []
for x, y in loader:
    assert x.shape[1:] == (3, 224, 224), x.shape
    labels += y.tolist()
names = [p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1].rsplit(".", 1)[0] for p, _ in ds.samples]
print(sorted(ds.class_to_idx.items()))
print(list(zip(names, labels)))
"""


def run_loader(root, kind):
    # Well inside meson's 600 s for the file, so a hang still reaches the mounts' cleanup.
    res = subprocess.run(["/usr/bin/python3", "-c", LOADER, str(root), kind], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_pytorch_dataloader_gives_the_same_labels_over_every_view(tmp_path):
    pytest.importorskip("torch")
    src = tmp_path / "src"
    gen_images(src, 3, 8)
    (tmp_path / "mnt").mkdir()
    expect = run_loader(src / "train", "source")
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        for view in ("raw", "decoded", "augmented"):
            assert run_loader(os.path.join(fs.mnt, view, "train"), view) == expect, view


def test_plan_reports_measured_costs_and_a_placement(dataset):
    src = dataset / "src"
    with Prepfs(src, dataset / "mnt", dataset / "ssd-plan", "ram=8M,ssd=64M") as fs:
        for rel in images(src)[:8]:
            open(view_path(fs.mnt, "decoded", rel), "rb").read()
            open(view_path(fs.mnt, "augmented", rel), "rb").read()
        # The plan's inputs are the profiler's, which measures once a second.
        wait_for(lambda: "c_dec" not in fs.stats()["profile"]["priors"], what="a profiler tick")
        plan = open(os.path.join(fs.mnt, ".prepfs", "plan")).read()
        import re
        assert int(re.search(r"samples\s+(\d+)", plan).group(1)) == 50, plan  # 48 + 2 bad but listed; the huge one is no sample
        for key in ("c_dec", "placement", "predicted throughput", "bound by", "all decoded", "no cache"):
            assert key in plan, key
        assert "c_dec: prior" not in plan  # decode cost was measured, not assumed


def test_fixed_partition_caches_only_the_forms_it_names(dataset):
    src = dataset / "src"
    with Prepfs(src, dataset / "mnt", dataset / "ssd-part", "ram=64M,ssd=64M,partition=fixed:0/100/0") as fs:
        for rel in images(src)[:10]:
            open(os.path.join(fs.raw(), rel), "rb").read()
            open(view_path(fs.mnt, "decoded", rel), "rb").read()
            open(view_path(fs.mnt, "augmented", rel), "rb").read()
        s = fs.stats()
        for tier in ("ram", "ssd"):
            forms = s[tier]["bytes_by_form"]
            assert forms["raw"] == 0 and forms["augmented"] == 0, (tier, forms)
        assert s["ram"]["bytes_by_form"]["decoded"] > 0
        # raw/ still serves every byte, from the source each time
        rel = images(src)[0]
        assert open(os.path.join(fs.raw(), rel), "rb").read() == (src / rel).read_bytes()


def test_profile_measures_costs_sources_and_the_view_mix(dataset):
    src = dataset / "src"
    rels = images(src)
    measured = {"src_latency", "src_bandwidth", "c_dec", "c_aug"}
    with Prepfs(src, dataset / "mnt", dataset / "ssd-prof", "ram=64M,ssd=64M,fast_paths=0") as fs:
        before = fs.stats()["profile"]
        assert measured | {"c_aug_from_decoded"} <= set(before["priors"]), before
        assert before["view"] == "raw", before  # nothing requested yet
        assert before["samples"] == 50  # 48 + 2 bad files whose headers look valid (not the huge one)
        assert before["size"]["augmented"] == len(b"P6\n224 224\n255\n") + 224 * 224 * 3
        # Decoded then augmented (from cached pixels, if the placement keeps decoded ones), augmented
        # alone (from JPEG), interleaved so that any split into profiler windows has augmented/ ahead.
        for i, rel in enumerate(rels[:20]):
            if i < 6:
                open(view_path(fs.mnt, "decoded", rel), "rb").read()
            open(view_path(fs.mnt, "augmented", rel), "rb").read()
        # Then augmented/ alone over a few windows, as a training loop reads.
        end = time.time() + 2.5
        while time.time() < end:
            for rel in rels[20:30]:
                open(view_path(fs.mnt, "augmented", rel), "rb").read()
        wait_for(lambda: not measured & set(fs.stats()["profile"]["priors"]), timeout=5, what="measured inputs")
        fs.wait_ticks(2)  # so every render above is in the profile
        s = fs.stats()
        p = s["profile"]
        assert p["cpu"]["decode_s"] > 0 and p["cpu"]["augment_from_jpeg_s"] > 0, p
        # c_aug is the augmented render's extra over a decoded/ render: it may be negative
        assert p["cpu"]["augment_s"] == pytest.approx(p["cpu"]["augment_from_jpeg_s"] - p["cpu"]["decode_s"], rel=1e-3, abs=1e-6), p
        assert p["cpu"]["augment_from_decoded_s"] > 0, p  # measured or prior
        from_pixels = s["transform"]["augmented_from_decoded"] > 0
        assert ("c_aug_from_decoded" in p["priors"]) != from_pixels, (s["transform"], p)
        assert p["cpu"]["cores"] >= 1
        assert p["source"]["latency_s"] > 0 and p["source"]["bandwidth_Bps"] > 0, p
        assert p["source"]["concurrency_in_use"] > 0, p
        assert p["copy_Bps"] > 0 and "copy_bw" not in p["unmeasured"], p
        views = p["views"]
        assert p["view"] == "augmented", p
        assert views["augmented"] > views["decoded"] > 0 and views["raw"] == 0, views
        assert abs(sum(views.values()) - 1) < 1e-3, views


def test_every_name_the_image_views_list_can_be_opened(tmp_path):
    # A 253-byte source name without extension becomes a 257-byte decoded/ name (over NAME_MAX),
    # and x.jpg beside a directory x.ppm would list x.ppm twice: such images are not listed
    # (logged once each); the directory is.
    src = tmp_path / "src"
    (src / "d" / "x.ppm").mkdir(parents=True)
    (tmp_path / "mnt").mkdir()
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 90)).save(buf, "JPEG")
    for rel in ("d/" + "n" * 253, "d/x.jpg", "d/ok.jpg", "d/x.ppm/inner.jpg"):
        (src / rel).write_bytes(buf.getvalue())
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        for view in ("decoded", "augmented"):
            listed = []
            for dirpath, dirnames, filenames in os.walk(os.path.join(fs.mnt, view)):
                rel = os.path.relpath(dirpath, os.path.join(fs.mnt, view))
                names = dirnames + filenames
                assert len(names) == len(set(names)), (view, rel, sorted(names))
                listed += [os.path.normpath(os.path.join(rel, n)) for n in filenames]
                for n in filenames:
                    with open(os.path.join(dirpath, n), "rb") as f:
                        assert f.read(3) == b"P6\n", (view, rel, n)
            assert sorted(listed) == ["d/ok.ppm", "d/x.ppm/inner.ppm"], (view, listed)
            assert os.path.isdir(os.path.join(fs.mnt, view, "d", "x.ppm"))
        assert sorted(os.listdir(fs.raw("d"))) == sorted(["n" * 253, "x.jpg", "ok.jpg", "x.ppm"])
        log = fs.log_text()
    assert log.count("longer than NAME_MAX") == 1, log
    assert log.count("is a directory's") == 1, log

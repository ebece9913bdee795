"""Bounded memory on a real mount: decompression bombs and many large renders at once from 64
threads never take the daemon's peak RSS (VmHWM) past its RAM budget plus its transform budget.

The bombs: a 16x16 JPEG padded to 3 GiB (the whole input used to be read before any limit), and
progressive CMYK JPEGs whose coefficient buffers alone are 291 MB (libjpeg's memory used to be
uncapped). Beside them, legitimate large images (a 12-megapixel baseline photo, progressive
ones) must still be served, byte-exact in decoded/."""
import errno
import hashlib
import io
import os
import random
import threading

import numpy as np
import pytest
from PIL import Image

from prepfs_harness import Prepfs

MIB = 1 << 20
RAM = 128 * MIB
TRANSFORM_MEM = 256 * MIB


def smooth_image(mode, width, height, seed):
    """A cheap, smooth (so small when encoded) but not flat image."""
    rng = np.random.default_rng(seed)
    channels = len(mode)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :]
    planes = [((x * rng.uniform(0.2, 1) + y * rng.uniform(0.2, 1) + rng.uniform(0, 255)) % 256).astype(np.uint8)
              for _ in range(channels)]
    return Image.fromarray(np.stack(planes, axis=2) if channels > 1 else planes[0], mode)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("mem")
    src = root / "src"
    src.mkdir()
    (root / "mnt").mkdir()
    # 1. A 16x16 JPEG padded to 3 GiB (sparse: no disk space).
    buf = io.BytesIO()
    smooth_image("RGB", 16, 16, 1).save(buf, "JPEG", quality=90)
    with open(src / "padded.jpg", "wb") as f:
        f.write(buf.getvalue())
        f.truncate(3 << 30)
    # 2. Progressive CMYK, 6000 x 6000: 291 MB of coefficient buffers, more than the budget leaves.
    cmyk = smooth_image("CMYK", 6000, 6000, 2)
    for i in range(2):
        cmyk.save(src / f"cmyk_prog_{i}.jpg", "JPEG", quality=80, progressive=True)
    del cmyk
    # 3. Legitimate large and medium images, served exactly within the budget.
    smooth_image("RGB", 4000, 3000, 3).save(src / "photo_12mp.jpg", "JPEG", quality=90)
    for i in range(24):
        smooth_image("RGB", 1600, 1200, 10 + i).save(src / f"medium_{i:02d}.jpg", "JPEG", quality=90,
                                                    progressive=i % 2 == 0)
    return root


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def asan_instrumented(pid):
    """The daemon runs under AddressSanitizer (the test command's second build)."""
    with open(f"/proc/{pid}/maps") as f:
        return "libasan" in f.read()


def memory_bound(pid):
    """ram + transform_mem + 10%; under ASan, plus what the sanitizer itself keeps: its shadow
    (an eighth of the heap) and its quarantine of freed blocks (256 MiB by default)."""
    bound = (RAM + TRANSFORM_MEM) * 1.1
    return bound * 1.125 + (256 << 20) if asan_instrumented(pid) else bound


def pil_ppm(path):
    img = Image.open(path).convert("RGB")
    return b"P6\n%d %d\n255\n" % img.size + img.tobytes()


def test_bombs_and_64_readers_stay_within_ram_plus_transform_mem(dataset):
    src = dataset / "src"
    bombs = ["padded", "cmyk_prog_0", "cmyk_prog_1"]
    good = ["photo_12mp"] + [f"medium_{i:02d}" for i in range(24)]
    expected = {n: hashlib.sha256(pil_ppm(src / f"{n}.jpg")).hexdigest() for n in ["photo_12mp", "medium_00",
                                                                                   "medium_01"]}
    with Prepfs(src, dataset / "mnt", dataset / "ssd", f"ram={RAM},ssd=0,transform_mem={TRANSFORM_MEM}") as fs:
        work = [(view, name) for view in ("decoded", "augmented") for name in bombs + good] * 3
        errors, eio = [], []

        def reader(seed):
            rng = random.Random(seed)
            for view, name in rng.sample(work, 8):
                path = os.path.join(fs.mnt, view, name + ".ppm")
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError as e:
                    (eio if e.errno == errno.EIO and name in bombs else errors).append(f"{view}/{name}: {e!r}")
                    continue
                if name in bombs[1:] or name == "padded":
                    # A bomb may be refused, never served wrong: its size is still what stat says.
                    if len(data) != os.stat(path).st_size:
                        errors.append(f"{view}/{name}: short read")
                elif view == "decoded" and name in expected:
                    if hashlib.sha256(data).hexdigest() != expected[name]:
                        errors.append(f"{view}/{name}: differs from PIL")
                elif view == "augmented" and not data.startswith(b"P6\n224 224\n255\n"):
                    errors.append(f"{view}/{name}: bad header")

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # The padded bomb is refused before a byte of it is fetched, with one log line.
        with pytest.raises(OSError) as e:
            open(os.path.join(fs.mnt, "decoded", "padded.ppm"), "rb").read()
        assert e.value.errno == errno.EIO
        peak = vm_hwm(fs.proc.pid)
        bound = memory_bound(fs.proc.pid)
        stats = fs.stats()
        log = fs.log_text()
    print(f"VmHWM {peak / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB, "
          f"source bytes {stats['source']['bytes']}, transform {stats['transform']}")
    assert errors == []
    assert eio, "the bombs were read: nothing was refused"
    assert peak < bound, f"VmHWM {peak / MIB:.0f} MiB"
    assert stats["source"]["bytes"] < 1 << 30, "the padded bomb was fetched"
    assert log.count("padded.jpg: cannot decode") == 1, log
    assert "max_input" in log

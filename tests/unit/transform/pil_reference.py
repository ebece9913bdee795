#!/usr/bin/python3
"""Reference data for the transform tests, made at test time by PIL / numpy / torchvision.

Run by meson as:  pil_reference.py run --suite pil|torchvision --exe TEST_EXE
  - exits 77 (meson: skipped) when the needed Python modules are missing, loudly;
  - writes fixtures + expected outputs into a temporary directory (see MANIFEST format below),
  - runs the C++ test executable on them (env PREPFS_XF_FIXTURES), whose tests FAIL (never
    skip) when that variable is missing, so they cannot pass without references,
  - then reads the PPM/NPY files the C++ side wrote back with PIL/numpy (round trip).
Other subcommands are used by the C++ tests themselves:
  decode IN OUT   PIL's Image.open(IN).convert('RGB') as raw bytes into OUT, or exit 3 if PIL
                  raises (used for JPEGs made with libjpeg in C++: YCCK, RGB, arithmetic, ...).

MANIFEST lines (space separated):
  decode NAME W H            PIL decodes NAME.jpg to W x H; NAME.rgb/.ppm/.npy are references
  error NAME                 PIL raises on NAME.jpg
  resize NAME L T W H OW OH REF       PIL: crop((L, T, L+W, T+H)).resize((OW, OH), BILINEAR)
  resizebox NAME X0 Y0 X1 Y1 OW OH REF PIL: resize((OW, OH), BILINEAR, box=(X0, Y0, X1, Y1))
  resizeflip NAME L T W H OW OH F REF  as resize, then transpose(FLIP_LEFT_RIGHT) when F is 1
  tvbox W H I J BH BW DRAWS...         torchvision RandomResizedCrop.get_params on a W x H image
  tvaug NAME REF DRAWS...              RandomResizedCrop(224) + RandomHorizontalFlip() output
  tvspec NAME SPEC REF                 deterministic torchvision transform equivalent to SPEC
DRAWS are u:VALUE (a uniform draw, Python repr) and i:VALUE (torch.randint), in call order.
"""
import io
import os
import subprocess
import sys
import tempfile

SKIP = 77


def need(modules):
    missing = []
    for m in modules:
        try:
            __import__(m)
        except ImportError:
            missing.append(m)
    if missing:
        print("#" * 70, file=sys.stderr)
        print(f"SKIPPED: {sys.executable} lacks {', '.join(missing)}; "
              "install python3-pil python3-numpy (and python3-torchvision for the torchvision suite)",
              file=sys.stderr)
        print("#" * 70, file=sys.stderr)
        sys.exit(SKIP)


# ---------------------------------------------------------------- synthetic photographs
def synthetic(w, h, seed):
    """Deterministic image with gradients, texture, edges and noise: enough structure for JPEG
    artefacts, chroma detail (to exercise upsampling) and aliasing when downscaled."""
    import numpy as np
    rs = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for c in range(3):
        fx, fy = rs.uniform(0.005, 0.2, 2)
        ph = rs.uniform(0, 6.28)
        img[..., c] = 127 + 60 * np.sin(x * fx + y * fy + ph) + 40 * (x / max(w, 1) - y / max(h, 1))
    for _ in range(6):  # hard-edged rectangles
        x0, y0 = rs.randint(0, max(w, 1)), rs.randint(0, max(h, 1))
        x1, y1 = x0 + rs.randint(1, max(w // 3, 2)), y0 + rs.randint(1, max(h // 3, 2))
        img[y0:y1, x0:x1] = rs.uniform(0, 255, 3)
    img += rs.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_image(w, h, mode, seed):
    from PIL import Image
    im = Image.fromarray(synthetic(w, h, seed), "RGB")
    return im.convert(mode) if mode != "RGB" else im


FIXTURES = [
    # name, w, h, mode, save kwargs
    ("rgb420", 500, 375, "RGB", dict(quality=90)),
    ("rgb444", 320, 240, "RGB", dict(quality=95, subsampling=0)),
    ("rgb422", 301, 199, "RGB", dict(quality=85, subsampling=1)),
    ("rgb420_odd", 333, 251, "RGB", dict(quality=75)),
    ("q50", 256, 256, "RGB", dict(quality=50)),
    ("q100", 128, 96, "RGB", dict(quality=100)),
    ("optimized", 200, 300, "RGB", dict(quality=80, optimize=True)),
    ("progressive", 480, 360, "RGB", dict(quality=85, progressive=True)),
    ("progressive444", 211, 157, "RGB", dict(quality=90, progressive=True, subsampling=0)),
    ("tiny1", 1, 1, "RGB", dict(quality=90)),
    ("tiny2x3", 2, 3, "RGB", dict(quality=90)),
    ("small17x9", 17, 9, "RGB", dict(quality=90)),
    ("gray", 256, 300, "L", dict(quality=90)),
    ("gray_odd", 97, 61, "L", dict(quality=80)),
    ("gray_progressive", 150, 100, "L", dict(quality=80, progressive=True)),
    ("cmyk", 200, 150, "CMYK", dict(quality=90)),
    ("cmyk_odd", 77, 55, "CMYK", dict(quality=70)),
    ("tall", 60, 900, "RGB", dict(quality=85)),
    ("wide", 900, 60, "RGB", dict(quality=85)),
    ("big", 1600, 1200, "RGB", dict(quality=88)),
]


def pil_decode(data):
    from PIL import Image
    im = Image.open(io.BytesIO(data))
    return im.convert("RGB")


def write_fixtures(out):
    import numpy as np
    from PIL import Image
    rs = np.random.RandomState(42)
    man = []
    jpegs = {}
    for i, (name, w, h, mode, kw) in enumerate(FIXTURES):
        buf = io.BytesIO()
        make_image(w, h, mode, 100 + i).save(buf, "JPEG", **kw)
        jpegs[name] = buf.getvalue()

    # Corrupt variants: PIL decides whether each is an error; the C++ side must agree.
    corrupt = {}
    for base in ("rgb420", "progressive", "gray_odd", "cmyk_odd"):
        d = jpegs[base]
        for n in sorted({2, 10, 100, 600, len(d) // 3, len(d) // 2, len(d) - 100, len(d) - 3,
                         len(d) - 2, len(d) - 1}):
            if 0 < n < len(d):
                corrupt[f"{base}_trunc{n}"] = d[:n]
        sos = d.find(b"\xff\xda")
        for k in range(6):
            b = bytearray(d)
            for _ in range(1 + k):
                p = rs.randint(sos + 20, len(d) - 2)
                b[p] ^= 1 << rs.randint(0, 8)
            corrupt[f"{base}_flip{k}"] = bytes(b)
        b = bytearray(d)
        b[rs.randint(sos + 20, len(d) - 2):] = b""  # cut, then
        corrupt[f"{base}_cut_eoi"] = bytes(b) + b"\xff\xd9"  # a proper EOI: libjpeg only warns
        # Damage after the scan data, where a decode of only the top rows would not look:
        # a second copy of the scan header (a baseline file must end after its scan) and a
        # table segment whose length runs past the end of the file.
        corrupt[f"{base}_sos_after_scan"] = d[:-2] + d[sos:sos + 14] + d[-2:]
        corrupt[f"{base}_bad_dht_after_scan"] = d[:-2] + b"\xff\xc4\x7f\xff\x00" + d[-2:]
    # Only the EOI missing: PIL decodes these when the scan data needed no byte after its end
    # (libjpeg then only fails to find the EOI, which PIL ignores), else fails as truncated.
    for name, d in jpegs.items():
        corrupt[f"{name}_no_eoi"] = d[:-2]
    corrupt["garbage"] = bytes(rs.randint(0, 256, 3000).astype(np.uint8))
    corrupt["soi_only"] = b"\xff\xd8\xff"
    corrupt["empty"] = b""

    for name, data in list(jpegs.items()) + list(corrupt.items()):
        with open(os.path.join(out, name + ".jpg"), "wb") as f:
            f.write(data)
        try:
            rgb = pil_decode(data)
        except Exception as e:  # noqa: BLE001 - any PIL failure means "error" for the view
            man.append(f"error {name}  # {type(e).__name__}: {str(e)[:60]}")
            continue
        arr = np.asarray(rgb)
        with open(os.path.join(out, name + ".rgb"), "wb") as f:
            f.write(arr.tobytes())
        rgb.save(os.path.join(out, name + ".ppm"))
        np.save(os.path.join(out, name + ".npy"), arr)
        man.append(f"decode {name} {rgb.width} {rgb.height}")

    # Resizes of decoded fixtures, as torchvision does them (crop then resize), plus float boxes.
    from PIL import Image as I
    n = 0
    for name, w, h, mode, kw in FIXTURES:
        im = pil_decode(jpegs[name])
        cases = [(0, 0, w, h, 224, 224), (0, 0, w, h, max(1, w // 2), max(1, h // 3)),
                 (0, 0, w, h, w * 2 + 1, h * 2 + 3), (0, 0, w, h, 160, 120), (0, 0, w, h, w, 7)]
        for _ in range(6):
            bw, bh = rs.randint(1, w + 1), rs.randint(1, h + 1)
            cases.append((rs.randint(0, w - bw + 1), rs.randint(0, h - bh + 1), bw, bh, 224, 224))
        for (l, t, bw, bh, ow, oh) in cases:
            ref = f"rs{n}.rgb"
            n += 1
            out_im = im.crop((l, t, l + bw, t + bh)).resize((ow, oh), I.BILINEAR)
            with open(os.path.join(out, ref), "wb") as f:
                f.write(out_im.tobytes())
            man.append(f"resize {name} {l} {t} {bw} {bh} {ow} {oh} {ref}")
        for _ in range(3):
            x0, y0 = rs.uniform(0, w / 2), rs.uniform(0, h / 2)
            x1, y1 = rs.uniform(x0, w), rs.uniform(y0, h)
            ow, oh = rs.randint(1, 300), rs.randint(1, 300)
            ref = f"rs{n}.rgb"
            n += 1
            out_im = im.resize((ow, oh), I.BILINEAR, box=(x0, y0, x1, y1))
            with open(os.path.join(out, ref), "wb") as f:
                f.write(out_im.tobytes())
            man.append(f"resizebox {name} {x0!r} {y0!r} {x1!r} {y1!r} {ow} {oh} {ref}")
    man.extend(random_geometry(out, jpegs))
    with open(os.path.join(out, "MANIFEST"), "w") as f:
        f.write("\n".join(man) + "\n")


def random_geometry(out, jpegs):
    """Resizes for the SIMD kernels, which every dispatch target runs: random crops (1-pixel
    ones included), odd sizes, upscales and downscales by up to 40x, float boxes and flips, on
    RGB, grayscale and CMYK sources. Reference files rg*.rgb (test_reference.cc picks them by
    that name). Its own random stream, so the cases above stay as they were."""
    import numpy as np
    from PIL import Image as I
    gs = np.random.RandomState(7)
    man = []
    n = 0
    for name in ("rgb420", "rgb422", "rgb420_odd", "progressive444", "gray", "gray_odd", "cmyk", "cmyk_odd",
                 "tall", "wide", "big", "tiny2x3", "small17x9"):
        im = pil_decode(jpegs[name])
        w, h = im.size

        def side(full):
            return 1 if gs.randint(0, 6) == 0 else gs.randint(1, full + 1)

        def out_side(inp):
            kind = gs.randint(0, 4)
            if kind == 0:
                return 1 if gs.randint(0, 2) == 0 else gs.randint(1, 700)
            if kind == 1:
                return max(1, inp // gs.randint(2, 41))  # strong downscale
            if kind == 2:
                return min(700, gs.randint(inp, 2 * inp + 2))  # upscale
            return max(1, inp * gs.randint(45, 100) // 100)  # RandomResizedCrop-like

        for _ in range(18):
            bw, bh = side(w), side(h)
            l, t = gs.randint(0, w - bw + 1), gs.randint(0, h - bh + 1)
            ow, oh = out_side(bw), out_side(bh)
            flip = gs.randint(0, 2)
            res = im.crop((l, t, l + bw, t + bh)).resize((ow, oh), I.BILINEAR)
            if flip:
                res = res.transpose(I.FLIP_LEFT_RIGHT)
            ref = f"rg{n}.rgb"
            n += 1
            with open(os.path.join(out, ref), "wb") as f:
                f.write(res.tobytes())
            man.append(f"resizeflip {name} {l} {t} {bw} {bh} {ow} {oh} {flip} {ref}")
        for _ in range(4):
            x0, x1 = sorted(gs.uniform(0, w, 2))
            y0, y1 = sorted(gs.uniform(0, h, 2))
            ow, oh = out_side(max(1, int(x1 - x0))), out_side(max(1, int(y1 - y0)))
            ref = f"rg{n}.rgb"
            n += 1
            with open(os.path.join(out, ref), "wb") as f:
                f.write(im.resize((ow, oh), I.BILINEAR, box=(x0, y0, x1, y1)).tobytes())
            man.append(f"resizebox {name} {x0!r} {y0!r} {x1!r} {y1!r} {ow} {oh} {ref}")
    return man


# ---------------------------------------------------------------- torchvision, recorded draws
def recording_torchvision():
    """Installs a proxy for the `torch` module used inside torchvision.transforms.transforms that
    records every random draw (value and order) while torchvision's own code runs unchanged."""
    import torch
    import torchvision.transforms.transforms as TT
    log = []

    class RecT(torch.Tensor):
        def uniform_(self, a, b):
            r = super().uniform_(a, b)
            log.append(("u", float(r.item())))
            return r

    class Proxy:
        def __getattr__(self, name):
            return getattr(torch, name)

        def empty(self, *a, **k):
            return torch.empty(*a, **k).as_subclass(RecT)

        def randint(self, *a, **k):
            r = torch.randint(*a, **k)
            log.append(("i", int(r.item())))
            return r

        def rand(self, *a, **k):
            r = torch.rand(*a, **k)
            log.append(("u", float(r.item())))
            return r

    TT.torch = Proxy()
    return TT, log


def draws_text(log):
    return " ".join(f"{k}:{v!r}" for k, v in log)


def write_torchvision(out):
    import numpy as np
    import torch
    TT, log = recording_torchvision()
    man = []
    from PIL import Image
    # get_params alone, over shapes that exercise acceptance, rejection and the fallback.
    shapes = [(500, 375), (375, 500), (224, 224), (1, 1), (3, 2), (17, 9), (60, 900), (900, 60),
              (10, 1000), (1000, 10), (4000, 3000), (101, 99)]
    for (w, h) in shapes:
        img = Image.new("RGB", (w, h))
        for s in range(200):
            torch.manual_seed(1000 * w + h + s)
            log.clear()
            i, j, bh, bw = TT.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
            man.append(f"tvbox {w} {h} {i} {j} {bh} {bw} {draws_text(log)}")
    # The full default transform on decoded fixtures.
    tf = TT.Compose([TT.RandomResizedCrop(224), TT.RandomHorizontalFlip()])
    n = 0
    for name in ("rgb420", "rgb444", "gray", "cmyk", "progressive", "tall", "wide", "small17x9",
                 "big"):
        im = Image.open(os.path.join(out, name + ".jpg")).convert("RGB")
        for s in range(12):
            torch.manual_seed(s)
            log.clear()
            res = tf(im)
            ref = f"tv{n}.rgb"
            n += 1
            with open(os.path.join(out, ref), "wb") as f:
                f.write(np.asarray(res).tobytes())
            man.append(f"tvaug {name} {ref} {draws_text(log)}")
    # Deterministic ops: our spec text next to the torchvision transform it stands for.
    det = [("resize(256);center_crop(224)", TT.Compose([TT.Resize(256), TT.CenterCrop(224)])),
           ("center_crop(400x300)", TT.CenterCrop((400, 300))),  # pads small images with 0
           ("resize(100x50)", TT.Resize((100, 50))),
           ("resize(7)", TT.Resize(7)),
           ("center_crop(31)", TT.CenterCrop(31))]
    for name in ("rgb420", "rgb422", "gray", "tall", "wide", "small17x9", "tiny2x3"):
        im = Image.open(os.path.join(out, name + ".jpg")).convert("RGB")
        for spec, t in det:
            ref = f"tv{n}.rgb"
            n += 1
            with open(os.path.join(out, ref), "wb") as f:
                f.write(np.asarray(t(im)).tobytes())
            man.append(f"tvspec {name} {spec} {ref}")
    with open(os.path.join(out, "MANIFEST_TV"), "w") as f:
        f.write("\n".join(man) + "\n")


# ---------------------------------------------------------------- round trip of our outputs
def check_outputs(out):
    """Reads back the PPM/NPY files the C++ tests wrote (out/ours/) with PIL and numpy."""
    import numpy as np
    from PIL import Image
    d = os.path.join(out, "ours")
    names = sorted(os.listdir(d)) if os.path.isdir(d) else []
    if not names:
        print("FAIL: the C++ tests wrote no PPM/NPY outputs to read back", file=sys.stderr)
        return 1
    bad = 0
    for fn in names:
        base, ext = os.path.splitext(fn)
        with open(os.path.join(out, base + ".rgb"), "rb") as f:
            ref = f.read()
        if ext == ".ppm":
            im = Image.open(os.path.join(d, fn))
            got = im.convert("RGB").tobytes() if im.mode == "RGB" else b"mode " + im.mode.encode()
        else:
            arr = np.load(os.path.join(d, fn))
            got = arr.tobytes() if arr.dtype == np.uint8 and arr.ndim == 3 else b"bad dtype/shape"
        if got != ref:
            print(f"FAIL: {fn} read back differs from PIL's decode", file=sys.stderr)
            bad += 1
    print(f"round trip: {len(names) - bad}/{len(names)} PPM/NPY files read back equal")
    return 1 if bad else 0


def run(suite, exe):
    need(["PIL", "numpy"] + (["torch", "torchvision"] if suite == "torchvision" else []))
    with tempfile.TemporaryDirectory(prefix="prepfs-xf-") as tmp:
        write_fixtures(tmp)
        gfilter = "PilReference*"
        if suite == "torchvision":
            write_torchvision(tmp)
            gfilter = "TorchvisionReference*"
        os.makedirs(os.path.join(tmp, "ours"))
        env = dict(os.environ, PREPFS_XF_FIXTURES=tmp, PREPFS_XF_PYTHON=sys.executable,
                   PREPFS_XF_REF_SCRIPT=os.path.abspath(__file__))
        rc = subprocess.call([exe, f"--gtest_filter={gfilter}"], env=env)
        if rc != 0:
            return rc
        if suite == "pil":
            return check_outputs(tmp)
        return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "run":
        import argparse
        ap = argparse.ArgumentParser()
        ap.add_argument("--suite", choices=["pil", "torchvision"], required=True)
        ap.add_argument("--exe", required=True)
        a = ap.parse_args(argv[2:])
        return run(a.suite, a.exe)
    if len(argv) == 4 and argv[1] == "decode":
        need(["PIL"])
        with open(argv[2], "rb") as f:
            data = f.read()
        try:
            rgb = pil_decode(data)
        except Exception as e:  # noqa: BLE001
            print(f"PIL error: {e}", file=sys.stderr)
            return 3
        with open(argv[3], "wb") as f:
            f.write(rgb.tobytes())
        return 0
    if len(argv) == 3 and argv[1] == "fixtures":  # for manual inspection and the bench
        need(["PIL", "numpy"])
        write_fixtures(argv[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""Writes the committed seeds of the JPEG fuzzer (tests/fuzz/corpus/jpeg/): tiny images of every
kind the decoder handles, so the fuzzer starts from each code path instead of finding the
format from nothing. Deterministic: the same Pillow gives the same bytes.

    /usr/bin/python3 tests/fuzz/make_jpeg_seeds.py tests/fuzz/corpus/jpeg
"""
import io
import os
import sys

from PIL import Image


def pattern(mode, w, h):
    img = Image.new(mode, (w, h))
    bands = len(img.getbands())
    img.putdata([tuple((x * 37 + y * 11 + b * 71) % 256 for b in range(bands)) if bands > 1
                 else (x * 37 + y * 11) % 256 for y in range(h) for x in range(w)])
    return img


SEEDS = {
    # name: (mode, width, height, save options)
    "baseline_420": ("RGB", 16, 16, dict(quality=75)),
    "baseline_444_odd": ("RGB", 17, 9, dict(quality=90, subsampling=0)),
    "baseline_422": ("RGB", 24, 8, dict(quality=50, subsampling=1)),
    "progressive": ("RGB", 20, 12, dict(quality=80, progressive=True)),
    "progressive_optimized": ("RGB", 9, 23, dict(quality=60, progressive=True, optimize=True)),
    "grayscale": ("L", 15, 11, dict(quality=85)),
    "grayscale_progressive": ("L", 8, 8, dict(quality=70, progressive=True)),
    "cmyk": ("CMYK", 12, 10, dict(quality=85)),
    "cmyk_progressive": ("CMYK", 10, 7, dict(quality=75, progressive=True)),
    "one_pixel": ("RGB", 1, 1, dict(quality=95)),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (mode, w, h, opts) in SEEDS.items():
        buf = io.BytesIO()
        pattern(mode, w, h).save(buf, "JPEG", **opts)
        with open(os.path.join(out, name + ".jpg"), "wb") as f:
            f.write(buf.getvalue())
    # EXIF before the frame header: the header walk's APPn skipping.
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x010E] = "seed with an EXIF block before the frame header"
    pattern("RGB", 8, 8).save(buf, "JPEG", quality=75, exif=exif.tobytes())
    with open(os.path.join(out, "exif.jpg"), "wb") as f:
        f.write(buf.getvalue())
    # Large enough for augmented/'s DCT scaling (a crop of at least 2 x 224 at 1/2 scale) and for
    # crop decoding to skip rows; smooth, so it stays a few KB, and gray, so a run of it costs
    # half what a colour one would (it is by far the slowest seed).
    buf = io.BytesIO()
    Image.linear_gradient("L").resize((1024, 960)).save(buf, "JPEG", quality=20, progressive=True)
    with open(os.path.join(out, "large_progressive.jpg"), "wb") as f:
        f.write(buf.getvalue())
    buf = io.BytesIO()
    pattern("RGB", 300, 40).save(buf, "JPEG", quality=30, optimize=True)
    with open(os.path.join(out, "wide_baseline.jpg"), "wb") as f:
        f.write(buf.getvalue())


if __name__ == "__main__":
    main()

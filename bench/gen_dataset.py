#!/usr/bin/python3
"""Deterministic ImageNet-like JPEG dataset generator for prepfs benchmarks and tests.

    /usr/bin/python3 bench/gen_dataset.py OUT_DIR --classes C --per-class N [--seed S] [--synthetic]

Layout: OUT_DIR/train/<wnid>/<wnid>_<number>.JPEG, with ImageNet-style names (n01440764/
n01440764_10026.JPEG). Images are ~300-500 px per side with ImageNet-like aspect ratios and a mean
size of about 110 KB.

Pixels come from real photographs when any are installed (bench/install-photos.sh installs Debian
wallpaper/example packages): each image is a random crop of a photo, downscaled, lightly sharpened
and given sensor-like grain, then saved at quality 90-95 with 4:4:4 chroma. (Plain crops of these
smooth wallpapers average ~40 KB; real camera JPEGs carry more high-frequency detail, which is what
the sharpening and grain restore.) Without photos, or with --synthetic, images are procedural
(gradients, shapes, noise) calibrated to the same size distribution.

Every image is a pure function of (seed, image index, source photo set), so a rerun with the same
arguments on a machine with the same photo packages writes byte-identical files. Every 50th image
is grayscale and one image is CMYK, so decoders meet those JPEG variants too.
"""

import argparse
import hashlib
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

PHOTO_ROOTS = ("/usr/share/backgrounds", "/usr/share/wallpapers",
               "/usr/share/doc/opencv-doc/examples")
PHOTO_EXTENSIONS = (".jpg", ".jpeg", ".png")
MIN_PHOTO_SIDE = 400
GRAYSCALE_EVERY = 50  # image i is grayscale when i % 50 == GRAYSCALE_PHASE
GRAYSCALE_PHASE = 17
CMYK_INDEX = 7  # the one CMYK image (or the last image, for tiny datasets)

# (width:height, weight). ImageNet is dominated by 4:3 landscape at 500 px on the long side.
ASPECTS = ((4 / 3, 50), (3 / 4, 14), (3 / 2, 12), (2 / 3, 5), (1.0, 9), (16 / 9, 5), (5 / 4, 5))


def image_rng(seed, index):
    """Per-image random generator, independent of generation order and worker count."""
    digest = hashlib.sha256(f"prepfs-gen:{seed}:{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def find_photos():
    """Sorted list of distinct photo files usable as crop sources (deduplicated by content)."""
    seen = set()
    photos = []
    candidates = []
    for root in PHOTO_ROOTS:
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                if name.lower().endswith(PHOTO_EXTENSIONS) and "screenshot" not in name:
                    candidates.append(os.path.join(dirpath, name))
    for path in sorted(candidates):
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha1(f.read()).hexdigest()
            if digest in seen:
                continue
            with Image.open(path) as im:
                # Photographs are RGB without alpha; masks, logos, charts and renders with
                # transparency are skipped, as are grayscale sources (grayscale is made on purpose).
                if im.mode != "RGB" or min(im.size) < MIN_PHOTO_SIDE:
                    continue
        except (OSError, ValueError):
            continue
        seen.add(digest)
        photos.append(path)
    return photos


def pick_size(rng):
    aspect = rng.choices([a for a, _ in ASPECTS], weights=[w for _, w in ASPECTS])[0]
    long_side = 500 if rng.random() < 0.7 else rng.randint(330, 500)
    short_side = max(200, round(long_side / max(aspect, 1 / aspect)))
    return (long_side, short_side) if aspect >= 1 else (short_side, long_side)


def add_grain(img, rng, sigma):
    """Gaussian per-pixel grain; numpy is seeded from the image's own generator."""
    noise_rng = np.random.default_rng(rng.getrandbits(64))
    pixels = np.asarray(img, dtype=np.float32)
    pixels += noise_rng.standard_normal(pixels.shape, dtype=np.float32) * np.float32(sigma)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), img.mode)


def photo_crop(photo, rng, size):
    """Random crop of `photo` with the aspect of `size`, covering 15-70% of its short side."""
    width, height = size
    pw, ph = photo.size
    scale = rng.uniform(0.15, 0.7)
    crop_w = max(width, round(min(pw, ph * width / height) * scale))
    crop_h = round(crop_w * height / width)
    if crop_w > pw or crop_h > ph:  # tiny source: take the largest box that fits
        factor = min(pw / crop_w, ph / crop_h)
        crop_w, crop_h = int(crop_w * factor), int(crop_h * factor)
    left = rng.randint(0, pw - crop_w)
    top = rng.randint(0, ph - crop_h)
    img = photo.crop((left, top, left + crop_w, top + crop_h)).resize(size, Image.LANCZOS)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    img = img.filter(ImageFilter.UnsharpMask(radius=rng.uniform(1.0, 2.0),
                                             percent=rng.randint(80, 160), threshold=1))
    return add_grain(img, rng, rng.uniform(4.0, 7.5))


def synthetic_image(rng, size):
    """Procedural image: gradient, blurred shapes, low-frequency texture and grain."""
    width, height = size
    noise_rng = np.random.default_rng(rng.getrandbits(64))
    # Smooth two-colour gradient along a random direction.
    c0 = np.array([rng.randint(0, 255) for _ in range(3)], dtype=np.float32)
    c1 = np.array([rng.randint(0, 255) for _ in range(3)], dtype=np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    ys, xs = np.ogrid[0:height, 0:width]
    t = (xs * np.float32(np.cos(angle)) + ys * np.float32(np.sin(angle))).astype(np.float32)
    t = (t - t.min()) / max(float(t.max() - t.min()), 1.0)
    base = c0 + (c1 - c0) * t[..., None]
    img = Image.fromarray(base.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(8, 30)):
        x0, y0 = rng.randint(-50, width), rng.randint(-50, height)
        x1, y1 = x0 + rng.randint(10, width // 2), y0 + rng.randint(10, height // 2)
        colour = tuple(rng.randint(0, 255) for _ in range(3))
        kind = rng.random()
        if kind < 0.4:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif kind < 0.7:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            points = [(rng.randint(0, width), rng.randint(0, height)) for _ in range(rng.randint(3, 6))]
            draw.polygon(points, fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 2.0)))
    # Low-frequency texture: coarse noise upscaled, so the image has photo-like mid frequencies.
    coarse = noise_rng.normal(0, 1, (height // 8 + 1, width // 8 + 1, 3)).astype(np.float32)
    coarse_img = Image.fromarray(np.clip(coarse * 40 + 128, 0, 255).astype(np.uint8), "RGB")
    texture = np.asarray(coarse_img.resize(size, Image.BICUBIC), dtype=np.float32) - 128.0
    pixels = np.asarray(img, dtype=np.float32) + texture * rng.uniform(0.3, 0.8)
    img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    return add_grain(img, rng, rng.uniform(4.5, 7.5))


def save_jpeg(img, path, rng, mode):
    """Saves with the dataset's colour variant; 4:4:4 chroma, quality 90-95."""
    quality = rng.randint(90, 95)
    if mode == "L":
        img = img.convert("L")
    elif mode == "CMYK":
        img = img.convert("CMYK")
    tmp = path + ".tmp"
    img.save(tmp, "JPEG", quality=quality, subsampling=0)
    os.replace(tmp, path)
    return os.path.getsize(path)


def colour_mode(index, total):
    if index == min(CMYK_INDEX, total - 1):
        return "CMYK"
    if index % GRAYSCALE_EVERY == GRAYSCALE_PHASE:
        return "L"
    return "RGB"


def make_names(seed, classes, per_class):
    """Deterministic ImageNet-style class ids (wnids) and per-class image numbers."""
    rng = random.Random(f"prepfs-names:{seed}")
    wnids = sorted(f"n{n:08d}" for n in rng.sample(range(1_000_000, 15_000_000), classes))
    names = []
    for wnid in wnids:
        numbers = sorted(rng.sample(range(1, 10 * per_class + 1000), per_class))
        names.extend((wnid, f"{wnid}_{number}.JPEG") for number in numbers)
    return names


def generate_group(args):
    """Writes the images whose source is one photo (or all synthetic ones). Returns bytes written."""
    out_dir, seed, photo_path, jobs, total = args
    photo = None
    if photo_path is not None:
        with Image.open(photo_path) as im:
            # JPEG sources decode at a reduced DCT scale while the short side stays >= 1200 px,
            # which is ample for 500 px crops and much cheaper for the 20-megapixel wallpapers.
            factor = 1200 / min(im.size)
            if factor < 1:
                im.draft("RGB", (round(im.size[0] * factor), round(im.size[1] * factor)))
            photo = im.convert("RGB")
    written = 0
    for index, wnid, filename in jobs:
        rng = image_rng(seed, index)
        rng.random()  # the source-choice draw, consumed the same way in both modes
        size = pick_size(rng)
        img = photo_crop(photo, rng, size) if photo is not None else synthetic_image(rng, size)
        path = os.path.join(out_dir, "train", wnid, filename)
        written += save_jpeg(img, path, rng, colour_mode(index, total))
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--per-class", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic", action="store_true", help="procedural images, no photos")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    args = parser.parse_args()
    if args.classes < 1 or args.per_class < 1:
        parser.error("--classes and --per-class must be positive")

    photos = [] if args.synthetic else find_photos()
    names = make_names(args.seed, args.classes, args.per_class)
    total = len(names)
    for wnid in sorted({wnid for wnid, _ in names}):
        os.makedirs(os.path.join(args.out_dir, "train", wnid), exist_ok=True)

    # Group images by source photo so each photo is decoded once per worker task.
    groups = {}
    for index, (wnid, filename) in enumerate(names):
        source = None
        if photos:
            source = photos[int(image_rng(args.seed, index).random() * len(photos))]
        groups.setdefault(source, []).append((index, wnid, filename))
    tasks = []
    for source, jobs in groups.items():
        # Split large groups (all of them, in synthetic mode) so the work spreads over the workers.
        for start in range(0, len(jobs), 50):
            tasks.append((args.out_dir, args.seed, source, jobs[start:start + 50], total))

    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        total_bytes = sum(pool.map(generate_group, tasks))

    kind = f"photos ({len(photos)} source files)" if photos else "synthetic"
    print(f"gen_dataset: {total} images in {args.classes} classes, "
          f"{total_bytes / 1e6:.1f} MB, mean {total_bytes / total / 1024:.1f} KB, source: {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

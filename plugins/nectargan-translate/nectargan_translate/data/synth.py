"""A synthetic paired dataset that pix2pix learns visibly within minutes on a CPU.

A is a label map: random circles, rectangles and triangles in one flat colour
per class on a flat background. B renders the same scene: each class has its
own material (a glossy sphere, a striped slab, a dotted tile), lit by one
fixed light from the upper left, casting soft shadows to the lower right on a
graded floor. Learning A -> B takes what real label-to-photo tasks take:
per-class colour and texture, shading that follows each shape's geometry,
and shadows that reach outside the labelled region, while staying
small and exactly reproducible.

Image ``i`` depends only on (seed, i) and the size: the same seed gives
byte-identical files (same numpy and Pillow versions), whatever ``count``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from nectargan_core import commit_folder, output_taken, staging

from .errors import DatasetError

VERSION = 1
CLASSES = ("background", "circle", "rectangle", "triangle")
#: A: one flat colour per class.
LABEL_COLOURS = np.array([(40, 40, 40), (220, 40, 40), (40, 200, 40), (40, 80, 220)], dtype=np.uint8)
#: B: the base colour of each class's material, in [0, 1].
MATERIALS = np.array([(0, 0, 0), (240, 170, 60), (70, 150, 170), (165, 95, 185)], dtype=np.float64) / 255
FLOOR_TOP, FLOOR_BOTTOM = np.array((215, 210, 200)) / 255, np.array((145, 140, 135)) / 255
LIGHT = np.array((-1.0, -1.0, 1.6)) / np.linalg.norm((-1.0, -1.0, 1.6))  # x right, y down, z to the viewer
HALFWAY = (LIGHT + (0, 0, 1)) / np.linalg.norm(LIGHT + (0, 0, 1))
AMBIENT = 0.3
SHADOW_STRENGTH = 0.55
SUPERSAMPLE = 4


def render_pair(seed: int, index: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Label map A and rendering B of scene ``index``, each ``size x size x 3`` uint8."""
    rng = np.random.default_rng(np.random.SeedSequence((seed, index)))
    ys, xs = np.mgrid[0:size, 0:size] + 0.5
    labels = np.zeros((size, size), dtype=np.uint8)
    floor = np.linspace(0.0, 1.0, size)[:, None, None]
    canvas = np.broadcast_to(FLOOR_TOP * (1 - floor) + FLOOR_BOTTOM * floor, (size, size, 3)).copy()
    for _ in range(int(rng.integers(1, 5))):
        kind = int(rng.integers(1, len(CLASSES)))
        centre = rng.uniform(0.15 * size, 0.85 * size, 2)
        outline = _outline(kind, centre, size, rng)
        coverage = _rasterise(kind, outline, size)
        offset = 0.06 * size * -LIGHT[:2] / np.linalg.norm(LIGHT[:2])
        shadow = _rasterise(kind, outline + offset, size, blur=0.035 * size)
        canvas *= 1 - SHADOW_STRENGTH * shadow[..., None]
        colour = _shade(kind, centre, outline, coverage, xs, ys, size)
        canvas = canvas * (1 - coverage[..., None]) + colour * coverage[..., None]
        labels[coverage >= 0.5] = kind
    canvas += rng.normal(0.0, 0.012, (size, size, 1))
    rendering = np.clip(np.rint(canvas * 255), 0, 255).astype(np.uint8)
    return LABEL_COLOURS[labels], rendering


def _outline(kind: int, centre: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Circle: ``[[cx, cy], [r, r]]``; otherwise the polygon's vertices, ``n x 2``."""
    if kind == 1:
        radius = rng.uniform(0.1, 0.2) * size
        return np.array([centre, (radius, radius)])
    angle = rng.uniform(0, np.pi)
    if kind == 2:
        half = rng.uniform(0.08, 0.2, 2) * size
        corners = np.array([(-1, -1), (1, -1), (1, 1), (-1, 1)]) * half
    else:
        angles = np.arange(3) * 2 * np.pi / 3 + rng.uniform(-0.25, 0.25, 3)
        radii = rng.uniform(0.16, 0.24, 3) * size
        corners = np.stack([np.cos(angles), np.sin(angles)], axis=1) * radii[:, None]
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return corners @ rotation.T + centre


def _rasterise(kind: int, outline: np.ndarray, size: int, blur: float = 0.0) -> np.ndarray:
    """Anti-aliased coverage in [0, 1], drawn at SUPERSAMPLE times the size and box-filtered down."""
    big = Image.new("L", (size * SUPERSAMPLE, size * SUPERSAMPLE), 0)
    draw = ImageDraw.Draw(big)
    scaled = outline * SUPERSAMPLE
    if kind == 1:
        (cx, cy), (r, _) = scaled
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=255)
    else:
        draw.polygon([tuple(p) for p in scaled], fill=255)
    small = big.resize((size, size), Image.Resampling.BOX)
    if blur:
        small = small.filter(ImageFilter.GaussianBlur(blur))
    return np.asarray(small, dtype=np.float64) / 255


def _shade(kind: int, centre: np.ndarray, outline: np.ndarray, coverage: np.ndarray,
           xs: np.ndarray, ys: np.ndarray, size: int) -> np.ndarray:
    """The lit material of one shape over the whole image (the caller masks it)."""
    base = MATERIALS[kind]
    dx, dy = xs - centre[0], ys - centre[1]
    if kind == 1:  # a sphere: Lambert plus a Blinn-Phong highlight
        radius = outline[1, 0]
        nx, ny = dx / radius, dy / radius
        nz = np.sqrt(np.clip(1 - nx ** 2 - ny ** 2, 0, None))
        normal = np.stack([nx, ny, nz], axis=-1)
        diffuse = np.clip(normal @ LIGHT, 0, None)
        highlight = np.clip(normal @ HALFWAY, 0, None) ** 24
        return base * (AMBIENT + (1 - AMBIENT) * diffuse[..., None]) + 0.6 * highlight[..., None]
    # A flat slab: brighter towards the light, darker at its bevelled rim, with a per-class texture.
    edges = outline - centre
    axis = edges[1] - edges[0]
    axis /= np.linalg.norm(axis)
    u, v = dx * axis[0] + dy * axis[1], -dx * axis[1] + dy * axis[0]
    reach = np.abs(edges).max()
    towards_light = (dx * LIGHT[0] + dy * LIGHT[1]) / (reach * np.linalg.norm(LIGHT[:2]))
    rim = np.asarray(Image.fromarray(np.uint8(coverage * 255)).filter(ImageFilter.GaussianBlur(0.04 * size)),
                     dtype=np.float64) / 255
    light = (0.8 + 0.2 * np.clip(towards_light, -1, 1)) * (0.6 + 0.4 * rim)
    period = 0.1 * size
    if kind == 2:  # stripes across the slab
        texture = 1 - 0.25 * (0.5 + 0.5 * np.sin(2 * np.pi * u / period))
    else:  # a grid of dots
        texture = 1 - 0.35 * (0.5 + 0.5 * np.cos(2 * np.pi * u / period) * np.cos(2 * np.pi * v / period)) ** 4
    return base * (light * texture)[..., None]


def split_counts(out: Path, *, count: int, val: float, test: float) -> dict[str, int]:
    """Images per split (train, val, test) of a new synthetic set in ``out``, which must be new or empty.

    The val and test fractions of ``count`` are rounded; train gets the rest,
    at least one image.
    """
    if output_taken(out):
        raise DatasetError(f"{out}: folder is not empty; choose a new folder for the synthetic dataset")
    n_val, n_test = round(count * val), round(count * test)
    n_train = count - n_val - n_test
    if n_train < 1:
        raise DatasetError(f"--count {count} with --val {val} and --test {test} leaves no training images")
    return {"train": n_train, "val": n_val, "test": n_test}


def write_synthetic(out: Path, *, count: int, size: int, seed: int, val: float, test: float) -> dict[str, int]:
    """Write ``count`` aligned A|B PNGs into ``out/train``, ``out/val`` and ``out/test``; return the counts.

    The first images go to train, then val, then test; names are the global
    index (``00000.png``). ``out/synth.json`` records how the set was made.
    The set is drawn in a temp folder beside ``out`` and renamed to ``out``
    only when complete: an interrupted run leaves no partial dataset.
    """
    counts = split_counts(out, count=count, val=val, test=test)
    with staging(out) as stage:
        index = 0
        for split, n in counts.items():
            folder = stage / split
            folder.mkdir()
            for _ in range(n):
                a, b = render_pair(seed, index, size)
                Image.fromarray(np.concatenate([a, b], axis=1)).save(folder / f"{index:05d}.png", format="PNG")
                index += 1
        meta = {"generator": "nectargan data synth", "version": VERSION, "seed": seed, "size": size,
                "classes": list(CLASSES), "splits": counts}
        (stage / "synth.json").write_text(json.dumps(meta, indent=2) + "\n")
        commit_folder(stage, out)
    return counts


def write_unpaired_synthetic(out: Path, *, count: int, size: int, seed: int, val: float,
                             test: float) -> dict[str, int]:
    """Write two unpaired domains of ``count`` images each into ``out/trainA``, ``out/trainB``, val and test.

    Domain A holds label maps (flat colours), domain B shaded renderings
    (materials, light, shadows): the same kind of scenes in two styles, so a
    CycleGAN learns a visible translation. Nothing pairs them: A's ``i``-th
    image is scene ``2i`` and B's scene ``2i + 1``, each file named after its
    scene. Splits that get no images get no folders. Returns the images per
    split (each domain has as many); ``out/synth.json`` records how the set
    was made. Like :func:`write_synthetic`, the set appears only when complete.
    """
    counts = split_counts(out, count=count, val=val, test=test)
    with staging(out) as stage:
        index = 0
        for split, n in counts.items():
            for domain in ("A", "B") if n else ():
                (stage / f"{split}{domain}").mkdir()
            for _ in range(n):
                for domain, scene, image in (("A", 2 * index, render_pair(seed, 2 * index, size)[0]),
                                             ("B", 2 * index + 1, render_pair(seed, 2 * index + 1, size)[1])):
                    Image.fromarray(image).save(stage / f"{split}{domain}" / f"{scene:05d}.png", format="PNG")
                index += 1
        meta = {"generator": "nectargan data synth --unpaired", "version": VERSION, "seed": seed, "size": size,
                "domains": {"A": "label maps", "B": "renderings"}, "classes": list(CLASSES), "splits": counts}
        (stage / "synth.json").write_text(json.dumps(meta, indent=2) + "\n")
        commit_folder(stage, out)
    return counts

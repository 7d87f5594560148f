"""``nectargan data``: make, prepare, check and download datasets; cut photographs into tiles and derive pairs.

Imported by the plugin module at load time, so everything heavier than
click is imported inside the command functions. None of these commands needs
torch: they read and write images with PIL and numpy.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import click

from nectargan_core import FRACTION_OPTION, IMAGE_SIDE_OPTION, SEED_OPTION, BoundedFloat, BoundedInt, printable

from .data.errors import DatasetError

class FolderPath(click.Path):
    """A folder argument; an empty one is refused (``Path("")`` would silently mean the current folder)."""

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if isinstance(value, str) and not value:
            self.fail("is empty; give a folder ('.' for the current one)", param, ctx)
        return super().convert(value, param, ctx)


DirPath = FolderPath(file_okay=False, path_type=Path)
Fraction = FRACTION_OPTION
#: ``data download --deadline``: a week; the default (6 h) fits the largest built-in dataset on a slow line.
DEADLINE_OPTION = BoundedFloat(0.0, 7 * 86_400.0, "a download that needs more than a week has stalled", low_open=True)
#: Synthetic scenes are drawn at 4x supersampling: 2048 pixels take about 1 GB of memory and 15 s per pair.
SYNTH_SIDE = BoundedInt(16, 2048, "scenes are drawn at 4x supersampling, and a 2048-pixel pair already takes "
                                  "about 1 GB of memory and 15 s")
SYNTH_COUNT = BoundedInt(1, 100_000, "a synthetic set is for trying things out; use real data for more")


@click.group("data")
def data_group() -> None:
    """Make, prepare, check and download image datasets: paired A/B, or unpaired domains."""


@data_group.command("synth")
@click.argument("out_dir", type=DirPath)
@click.option("--count", type=SYNTH_COUNT, default=200, show_default=True, help="Pairs over all splits (at most 100000).")
@click.option("--size", type=SYNTH_SIDE, default=64, show_default=True,
              help="Side of A and of B in pixels, 16 to 2048 (files are twice as wide).")
@click.option("--seed", type=SEED_OPTION, default=0, show_default=True, help="Same seed, same bytes.")
@click.option("--val", type=Fraction, default=0.1, show_default=True, help="Fraction of pairs for val/.")
@click.option("--test", type=Fraction, default=0.1, show_default=True, help="Fraction of pairs for test/.")
@click.option("--unpaired", is_flag=True, help="Write two unpaired domains (trainA/ label maps, trainB/ renderings "
                                               "of other scenes, ...) for CycleGAN; --count images per domain.")
def synth(out_dir: Path, count: int, size: int, seed: int, val: float, test: float, unpaired: bool) -> None:
    """Write a deterministic synthetic dataset: label maps of shapes (A) and their shaded renderings (B).

    With --unpaired, A and B are different scenes in the two styles, in the
    unpaired layout (trainA/ trainB/ valA/ valB/ testA/ testB/).

    \b
    Examples:
      nectargan data synth datasets/shapes
      nectargan data synth datasets/shapes128 --size 128 --count 400 --seed 7
      nectargan data synth datasets/shapes-unpaired --unpaired
    """
    from .data.synth import write_synthetic, write_unpaired_synthetic

    if unpaired:
        counts = write_unpaired_synthetic(out_dir, count=count, size=size, seed=seed, val=val, test=test)
        click.echo(f"wrote 2 x {count} unpaired {size}x{size} images to {out_dir} ({_counts(counts)} per domain)")
        return
    counts = write_synthetic(out_dir, count=count, size=size, seed=seed, val=val, test=test)
    click.echo(printable(f"wrote {count} aligned {size}x{size} pairs to {out_dir} ({_counts(counts)})"))


@data_group.command("pair")
@click.argument("a_dir", type=DirPath)
@click.argument("b_dir", type=DirPath)
@click.argument("out_dir", type=DirPath)
@click.option("--size", type=IMAGE_SIDE_OPTION, default=None, help="Resize A and B to SIZE x SIZE (at most 8192).")
def pair(a_dir: Path, b_dir: Path, out_dir: Path, size: Optional[int]) -> None:
    """Join same-named images of A_DIR and B_DIR into aligned A|B PNGs in OUT_DIR.

    Sub-folders train/, val/ and test/ of A_DIR are paired with those of B_DIR.

    \b
    Examples:
      nectargan data pair photos/labels photos/images datasets/mine
      nectargan data pair A B datasets/mine --size 256
    """
    from .data.prepare import pair_folders

    counts = pair_folders(a_dir, b_dir, out_dir, size=size)
    click.echo(printable(f"wrote {sum(counts.values())} aligned pairs to {out_dir} ({_counts(counts)})"))


@data_group.command("split")
@click.argument("directory", type=DirPath)
@click.option("--val", type=Fraction, default=0.1, show_default=True, help="Fraction for val/.")
@click.option("--test", type=Fraction, default=0.1, show_default=True, help="Fraction for test/.")
@click.option("--seed", type=SEED_OPTION, default=0, show_default=True, help="Seed of the assignment.")
@click.option("--copy", is_flag=True, help="Copy the files instead of moving them.")
@click.option("--unpaired", is_flag=True, help="DIRECTORY's A/ and B/ are two unpaired piles: split each into "
                                               "trainA/ valA/ testA/ and trainB/ valB/ testB/.")
@click.option("--group/--no-group", default=None,
              help="Keep the tiles of one photograph (names from 'data tile': PHOTO__xXyY) in one split; "
                   "another image is a photograph of its own. Default: on when any name is a tile's.")
def split(directory: Path, val: float, test: float, seed: int, copy: bool, unpaired: bool,
          group: Optional[bool]) -> None:
    """Distribute the images of a flat DIRECTORY (or its A/ and B/) into train/, val/ and test/.

    The same names and seed always give the same assignment. With
    --unpaired, A/ and B/ are split each on its own into the unpaired layout
    (trainA/ valA/ testA/, trainB/ valB/ testB/). A DIRECTORY already in that
    layout (trainA/ and trainB/, as the CycleGAN datasets come) gets valA/
    and valB/ (and testA/ testB/ with --test) from its train images.

    \b
    Examples:
      nectargan data split datasets/mine --val 0.1 --test 0.1 --seed 0
      nectargan data split datasets/mine --copy
      nectargan data split datasets/photos2paintings --unpaired
      nectargan data split datasets/horse2zebra --val 0.05 --test 0
    """
    from .data.domains import is_unpaired
    from .data.prepare import split_folder, split_unpaired

    verb = "copied" if copy else "moved"
    if unpaired or is_unpaired(directory):
        counts = split_unpaired(directory, val=val, test=test, seed=seed, copy=copy, group=group)
        click.echo(printable(f"split {directory} (unpaired): {_counts(counts)} images ({verb})"))
        return
    counts, groups = split_folder(directory, val=val, test=test, seed=seed, copy=copy, group=group)
    kept = f"; the tiles of each photograph kept together: photographs {_counts(groups)}" if groups else ""
    click.echo(printable(f"split {sum(counts.values())} images of {directory}: {_counts(counts)} ({verb}){kept}"))


@data_group.command("tile")
@click.argument("photos", type=DirPath)
@click.argument("out_dir", type=DirPath)
@click.option("--size", type=IMAGE_SIDE_OPTION, default=256, show_default=True,
              help="Side of each square tile in pixels (the training size).")
@click.option("--stride", type=IMAGE_SIDE_OPTION, default=None,
              help="Pixels between tiles of the grid (default: --size, tiles that touch; smaller: overlapping).")
@click.option("--crops", type=BoundedInt(1, 10_000, "more random crops than that repeat each other"), default=None,
              help="Instead of a grid, this many random tiles per photograph.")
@click.option("--min-detail", type=BoundedFloat(0.0, 128.0, "a luminance deviation is at most 127.5"), default=2.0,
              show_default=True, help="Leave out tiles whose luminance varies less than this (standard deviation "
                                      "in grey levels, 0-255): sky, walls, margins. 0 keeps every tile.")
@click.option("--seed", type=SEED_OPTION, default=0, show_default=True, help="Seed of --crops' positions.")
@click.pass_context
def tile(ctx: click.Context, photos: Path, out_dir: Path, size: int, stride: Optional[int], crops: Optional[int],
         min_detail: float, seed: int) -> None:
    """Cut the photographs in PHOTOS into SIZE x SIZE tiles in OUT_DIR (PNG).

    Each tile is named after its photograph and place (PHOTO__x512y256.png),
    so 'data split' keeps a photograph's tiles in one split. The last row
    and column of the grid are flush with the photo's edges; photographs
    smaller than a tile are named and left out. PHOTOS with train/, val/,
    test/ is tiled split by split. OUT_DIR appears only when complete.

    \b
    Examples:
      nectargan data tile photos tiles --size 256
      nectargan data tile photos tiles --size 256 --stride 128
      nectargan data tile photos tiles --size 256 --crops 20 --seed 1
      nectargan data derive tiles pairs --edges && nectargan data split pairs
    """
    from click.core import ParameterSource

    from .data.tiles import tile_photos

    if crops is None and ctx.get_parameter_source("seed") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--seed places --crops' random tiles; a grid (without --crops) has nothing to draw")
    with _stopped_cleanly(out_dir):
        report = tile_photos(photos, out_dir, size=size, stride=stride, crops=crops, seed=seed,
                             min_detail=min_detail, progress=_progress("photographs"))
    for path in report.small:
        click.echo(printable(f"note: {path}: smaller than {size}x{size}; left out"), err=True)
    _photo_notes(report.reduced, report.loose, photos)
    flat = f", {report.flat} near-empty tile(s) left out (--min-detail {min_detail:g})" if report.flat else ""
    click.echo(printable(f"wrote {sum(report.tiles.values())} tiles of {size}x{size} from "
                         f"{sum(report.photos.values())} photograph(s) to {out_dir} ({_counts(report.tiles)}){flat}"))


@data_group.command("derive")
@click.argument("photos", type=DirPath)
@click.argument("out_dir", type=DirPath)
@click.option("--edges", is_flag=True, help="A = the photo's edges (Canny: black lines on white).")
@click.option("--grey", is_flag=True, help="A = the photo in greyscale (colourisation).")
@click.option("--blur", is_flag=True, help="A = the photo blurred (deblurring); radius: --sigma.")
@click.option("--downscale", is_flag=True, help="A = the photo shrunk by --factor and scaled back (super-resolution).")
@click.option("--jpeg", is_flag=True, help="A = the photo saved as JPEG at --quality (artefact removal).")
@click.option("--mask", is_flag=True, help="A = the photo with --holes grey rectangles (inpainting).")
@click.option("--sigma", type=BoundedFloat(0.0, 64.0, "a wider blur erases the image"), default=None,
              help="--edges: smoothing before the gradient (default 1.4); --blur: the blur's radius (default 2).")
@click.option("--low", type=BoundedFloat(0.0, 1500.0, "a Sobel gradient of 8-bit pixels stays below 1443"),
              default=40.0, show_default=True, help="--edges: weak-edge threshold on the gradient magnitude.")
@click.option("--high", type=BoundedFloat(0.0, 1500.0, "a Sobel gradient of 8-bit pixels stays below 1443"),
              default=100.0, show_default=True, help="--edges: strong-edge threshold on the gradient magnitude.")
@click.option("--factor", type=BoundedInt(2, 16, "a 16x smaller image keeps almost nothing"), default=4,
              show_default=True, help="--downscale: how many times smaller.")
@click.option("--quality", type=BoundedInt(1, 95, "JPEG quality runs from 1 to 95"), default=20,
              show_default=True, help="--jpeg: the JPEG quality.")
@click.option("--holes", type=BoundedInt(1, 64, "more holes than that cover the image"), default=3,
              show_default=True, help="--mask: rectangles per image, each 1/8 to 1/4 of the sides.")
@click.option("--seed", type=SEED_OPTION, default=0, show_default=True, help="--mask: seed of the holes' places.")
@click.pass_context
def derive(ctx: click.Context, photos: Path, out_dir: Path, edges: bool, grey: bool, blur: bool, downscale: bool,
           jpeg: bool, mask: bool, sigma: Optional[float], low: float, high: float, factor: int, quality: int,
           holes: int, seed: int) -> None:
    """Make a paired dataset from photographs alone: A computed from each photo, B the photo.

    Writes OUT_DIR/NAME.png = A|B (the aligned layout; PHOTOS with train/,
    val/, test/ keeps them), the same size as the photo, deterministic for
    the same photos, options and seed. Train AtoB to learn the task: edges
    to photos, grey to colour, blurred to sharp, small to large, compressed
    to clean, holes to whole. OUT_DIR appears only when complete.

    \b
    Examples:
      nectargan data derive tiles pairs --edges
      nectargan data derive tiles pairs --edges --low 20 --high 60
      nectargan data derive tiles pairs --downscale --factor 4
      nectargan data derive tiles pairs --jpeg --quality 10
    """
    from click.core import ParameterSource

    from .data.derive import Derivation, derive_pairs

    chosen = [name for name, on in (("edges", edges), ("grey", grey), ("blur", blur), ("downscale", downscale),
                                    ("jpeg", jpeg), ("mask", mask)) if on]
    if len(chosen) != 1:
        given = f" (got {', '.join('--' + name for name in chosen)})" if chosen else ""
        raise click.UsageError(f"choose what A is: one of --edges, --grey, --blur, --downscale, --jpeg, --mask{given}")
    method = chosen[0]
    uses = {"sigma": ("edges", "blur"), "low": ("edges",), "high": ("edges",), "factor": ("downscale",),
            "quality": ("jpeg",), "holes": ("mask",), "seed": ("mask",)}
    for option, methods in uses.items():
        if method not in methods and ctx.get_parameter_source(option) == ParameterSource.COMMANDLINE:
            raise click.UsageError(f"--{option} goes with {' or '.join('--' + m for m in methods)}, not --{method}")
    if sigma is None:
        sigma = 2.0 if method == "blur" else 1.4
    derivation = Derivation(method, low=low, high=high, sigma=sigma, factor=factor, quality=quality, holes=holes,
                            seed=seed)
    with _stopped_cleanly(out_dir):
        report = derive_pairs(photos, out_dir, derivation, progress=_progress("photographs"))
    _photo_notes(report.reduced, report.loose, photos)
    click.echo(printable(f"wrote {sum(report.pairs.values())} aligned pairs to {out_dir} ({_counts(report.pairs)}); "
                         f"A: {derivation.describe()}, B: the photograph; check them with: nectargan data check "
                         f"{out_dir}"))


@data_group.command("check")
@click.argument("directory", type=DirPath)
@click.option("--layout", type=click.Choice(["auto", "aligned", "folders", "unpaired"]), default="auto",
              show_default=True, help="auto: unpaired when DIRECTORY holds trainA/ or trainB/ (or a val or test "
                                      "domain), else each split's own layout.")
@click.option("--quick", is_flag=True, help="Read only image headers (finds missing and mismatched files, "
                                              "not truncated ones).")
def check(directory: Path, layout: str, quick: bool) -> None:
    """Check a dataset: every problem is printed on its own line; exit 1 if there is any.

    DIRECTORY is a dataset root (checks its train/, val/ and test/, or in the
    unpaired layout its trainA/ trainB/, valA/ valB/, testA/ testB/) or one
    split folder. Every image is decoded unless --quick, with the decoder
    training uses. Images stored turned with an EXIF orientation are read
    upright; a note says how many there are.

    \b
    Examples:
      nectargan data check datasets/facades
      nectargan data check datasets/facades/train --quick
      nectargan data check datasets/horse2zebra
    """
    from .data.check import inspect_split
    from .data.domains import DOMAINS, is_unpaired
    from .data.options import SPLITS

    if not directory.is_dir():
        raise DatasetError(f"{directory}: folder does not exist")
    if layout == "unpaired" or (layout == "auto" and is_unpaired(directory)):
        _check_unpaired(directory, quick)
        return
    split_of = {f"{split}{domain}": split for split in SPLITS for domain in DOMAINS}
    if layout == "auto" and directory.name in split_of and is_unpaired(directory.parent):
        _check_unpaired(directory.parent, quick, only=split_of[directory.name])  # a domain folder: its split
        return
    splits = [s for s in SPLITS if (directory / s).is_dir()]
    folders = {s: directory / s for s in splits} or {directory.name: directory}
    problems: list[str] = []
    oriented: list[tuple[Path, int]] = []
    found: dict[str, int] = {}
    layouts = set()
    for name, folder in folders.items():
        report = inspect_split(folder, layout, verify="header" if quick else "full")  # type: ignore[arg-type]
        problems += report.problems
        oriented += report.oriented
        found[name] = len(report.pairs)
        layouts.add(report.layout)
    if oriented:
        from .data.pixels import describe_orientation

        path, value = oriented[0]
        click.echo(f"note: {len(oriented)} image(s) are stored turned, with an EXIF orientation; they are read "
                   f"upright, as image viewers show them (e.g. {path}: {describe_orientation(value)})", err=True)
    problems = list(dict.fromkeys(problems))  # one about the dataset folder (an interrupted split) once, not per split
    for problem in problems:
        click.echo(printable(problem))  # one problem, one line: a newline in a file name is shown escaped
    if problems:
        raise DatasetError(f"{directory}: {len(problems)} problem(s) found")
    checked = "headers read" if quick else "every image decoded"
    click.echo(printable(f"ok: {directory}: {'/'.join(sorted(layouts))} layout, {_counts(found)} pairs; {checked}"))


def _check_unpaired(directory: Path, quick: bool, only: Optional[str] = None) -> None:
    """``data check`` of the unpaired layout: both domains of every split (or of split ``only``), every image read."""
    from .data.domains import inspect_domains, present_splits

    splits = [only] if only else present_splits(directory)
    if not splits:
        raise DatasetError(f"{directory}: no trainA/ or trainB/ (nor a val or test domain); the unpaired layout "
                           "holds a folder per domain and split")
    problems: list[str] = []
    found: dict[str, int] = {}
    for split in splits:
        report = inspect_domains(directory, split, verify="header" if quick else "full")
        problems += report.problems
        found.update({f"{split}{domain}": len(images) for domain, images in report.images.items()})
    if "train" not in splits and not only:
        problems.append(f"{directory}: no trainA/ and trainB/; training reads them")
    problems = list(dict.fromkeys(problems))
    for problem in problems:
        click.echo(printable(problem))
    if problems:
        raise DatasetError(f"{directory}: {len(problems)} problem(s) found")
    checked = "headers read" if quick else "every image decoded"
    click.echo(f"ok: {directory}: unpaired layout, {_counts(found)} images; {checked}")


@data_group.command("download")
@click.argument("name")
@click.option("--url", default=None, help="Download from this URL instead (a mirror; or a local archive: "
                                          "file:// URL or path).")
@click.option("--dest", type=DirPath, default=Path("datasets"), show_default=True,
              help="Folder that receives the dataset folder.")
@click.option("--sha256", "sha256", default=None, metavar="HEX", help="Expected SHA-256 of the archive.")
@click.option("--deadline", type=DEADLINE_OPTION, default=6 * 3600, show_default=True,
              metavar="SECONDS", help="Give up a download that takes longer than this.")
def download(name: str, url: Optional[str], dest: Path, sha256: Optional[str], deadline: float) -> None:
    """Download a public pix2pix dataset and extract it safely into DEST/NAME.

    NAME is one of cityscapes, edges2handbags, edges2shoes, facades, maps,
    night2day (from the pix2pix authors' server, over HTTPS), or any name with
    --url. The server publishes no checksums: the SHA-256 of the download is
    printed so that later downloads can be pinned with --sha256. Only plain
    files and folders are extracted (an archive with links, devices or names
    leaving DEST is refused), and the dataset folder appears only when complete.

    \b
    Examples:
      nectargan data download facades
      nectargan data download facades --sha256 HEX --dest data
      nectargan data download mine --url https://example.org/mine.tar.gz
    """
    import re

    from .data.download import download_dataset, plain_http

    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        raise click.BadParameter("must be 64 hexadecimal digits", param_hint="--sha256")
    if url is not None and sha256 is None and plain_http(url):
        click.echo(f"warning: {printable(url)} is plain HTTP and no --sha256 is given: nothing proves the archive "
                   "was not changed on the way", err=True)
    interactive = sys.stderr.isatty()
    folder, digest = download_dataset(name, dest, url=url, sha256=sha256, deadline=deadline,
                                      progress=_show_progress if interactive else None)
    if interactive:
        click.echo(err=True)
    click.echo(printable(f"downloaded {name} to {folder} (sha256 {digest}); "
                         f"check it with: nectargan data check {folder}"))


@contextlib.contextmanager
def _stopped_cleanly(out_dir: Path) -> Iterator[None]:
    """A SIGTERM (``kill``, ``docker stop``) stops the command as Ctrl-C does: the half-built output is removed and
    one line says so (the default action would end the process where it stands, leaving the temp folder)."""
    def stop(signum: int, frame: Any) -> None:
        raise DatasetError(printable(f"{out_dir}: stopped by SIGTERM; nothing was written"))

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (an embedding application): leave signals to it
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _photo_notes(reduced: list[Path], loose: list[Path], photos: Path) -> None:
    """The photo tools' notes: photographs read at more than 8 bits, images beside the split folders."""
    if reduced:
        click.echo(printable(f"note: {len(reduced)} photograph(s) have more than 8 bits per sample (e.g. "
                             f"{reduced[0]}); their outputs are 8-bit (integers scaled from their full range, floating point "
                             "read as 0..1)"), err=True)
    if loose:
        click.echo(printable(f"note: {len(loose)} image(s) beside the split folders of {photos} were not read (e.g. "
                             f"{loose[0]}); only train/, val/ and test/ are, when {photos} has them"), err=True)


def _progress(what: str) -> Optional[Callable[[int, int], None]]:
    """A one-line progress counter on an interactive stderr (``3/40 photographs``), else None."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        click.echo(f"\r  {done}/{total} {what}", nl=False, err=True)
        if done == total:
            click.echo(err=True)

    return show


def _show_progress(done: int, total: Optional[int]) -> None:
    text = f"{done / 1e6:.1f} MB" + (f" of {total / 1e6:.1f} MB ({100 * done // total}%)" if total else "")
    click.echo(f"\r  {text}", nl=False, err=True)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())

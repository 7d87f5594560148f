"""Image files to pixel arrays: the one place where untrusted bytes are decoded.

Everything that reads pixels (the dataset, ``test``, ``predict``, ``data
check``) comes through :func:`read_pixels`, so they all accept and refuse the
same files. The rules:

* **Only Pillow decodes.** Its decoders check their input and raise on
  corrupt data. torchvision's native PNG decoder is never given file bytes:
  a single damaged byte in a PNG's image data made it crash the whole
  process (a segmentation fault, no message, the run left ``running``).
* **PNG checksums are verified** before decoding: every critical chunk
  (IHDR, PLTE, IDAT, IEND) must match its CRC-32. Pillow stops inflating once
  it has every row and does not check IDAT CRCs, so without this a damaged
  byte could decode into wrong pixels silently.
* **EXIF orientation is applied**: a phone photo stored sideways with an
  orientation tag is read the way every image viewer shows it, so it pairs
  with an upright partner. :func:`oriented_size` gives the size after that,
  from the header alone.
* **16 bits stay 16 bits.** Pillow reads 16-bit grey PNGs natively but cuts
  16-bit colour PNGs to 8 bits; for those its decoder (which undoes the PNG
  row filters) runs twice, once keeping the high and once the low byte of
  every sample (grey+alpha: once, with the raw bytes).

Every failure is an :class:`UnreadableImage` whose message is one line
naming the file. Torch-free, so ``nectargan data check`` stays light.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from PIL import Image, UnidentifiedImageError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The EXIF tag that says how the stored pixels must be turned to be upright.
ORIENTATION_TAG = 0x0112
#: Orientations 5-8 swap width and height.
SWAPS_SIDES = frozenset({5, 6, 7, 8})

#: Pillow modes that are converted before reading pixels, and what they become.
PIL_CONVERSIONS = {"1": "L", "P": "RGB", "PA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB",
                   "HSV": "RGB", "La": "LA", "RGBa": "RGBA", "RGBX": "RGB", "I;16B": "I", "I;16L": "I"}

#: How each EXIF orientation (2-8) turns an ``H x W x C`` array upright (as Pillow's exif_transpose).
ORIENT: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1],
    5: lambda a: a.swapaxes(0, 1),
    6: lambda a: np.rot90(a, -1),
    7: lambda a: a.swapaxes(0, 1)[::-1, ::-1],
    8: lambda a: np.rot90(a, 1),
}


class UnreadableImage(Exception):
    """An image that cannot be read or decoded; the message is one line naming the file."""


def read_pixels(path: Path) -> np.ndarray:
    """The upright pixels of the image at ``path``: ``H x W x C`` (C = 1-4), uint8, uint16 or int32."""
    data = _read_bytes(path)
    if data.startswith(PNG_SIGNATURE):
        check_png(path, data)
    try:
        with _quiet(), Image.open(io.BytesIO(data)) as image:
            orientation = exif_orientation(image)
            array = _png16_colour(image, data) if _is_png16_colour(image) else _pixels(image)
    except UnreadableImage:
        raise
    except Exception as exc:  # noqa: BLE001 - Pillow's decoders raise many types on corrupt data
        raise UnreadableImage(f"{path}: cannot read image: {describe_read_error(exc)}") from None
    if array.ndim == 2:
        array = array[:, :, None]
    if orientation in ORIENT:
        array = ORIENT[orientation](array)
    return np.require(array, requirements=["C_CONTIGUOUS", "WRITEABLE"])  # torch takes it without a copy


def open_upright(path: Path) -> Image.Image:
    """The image at ``path`` as a loaded Pillow image, turned upright by its EXIF orientation (for the data tools,
    which keep its mode); :class:`UnreadableImage` naming the file when it does not decode."""
    data = _read_bytes(path)
    if data.startswith(PNG_SIGNATURE):
        check_png(path, data)
    try:
        with _quiet(), Image.open(io.BytesIO(data)) as image:
            turned = upright(image)
            turned.load()
    except Exception as exc:  # noqa: BLE001 - Pillow's decoders raise many types on corrupt data
        raise UnreadableImage(f"{path}: cannot read image: {describe_read_error(exc)}") from None
    return turned


@functools.lru_cache(maxsize=None)
def pillow_orients_tiff() -> bool:
    """Whether the installed Pillow applies a TIFF's Orientation tag when it opens the file (newer releases do,
    and drop the tag; older ones leave both to the caller). Found once, on a 2x1 TIFF made in memory."""
    buffer = io.BytesIO()
    Image.new("L", (2, 1)).save(buffer, format="TIFF", tiffinfo={ORIENTATION_TAG: 6})
    buffer.seek(0)
    with Image.open(buffer) as image:
        return image.size == (1, 2)


#: The photo tools (``data tile``, ``data derive``) read photographs of up to this many pixels (a 200-megapixel
#: phone photo is 2e8); Pillow's own limit (about 179 million, twice its warning threshold) guards training.
PHOTO_PIXELS = 400_000_000


def open_photo(path: Path) -> tuple[Image.Image, int]:
    """A photograph for the photo tools: loaded, upright, in 8-bit ``L``, ``RGB`` or ``RGBA``; and the bits per
    sample it had (16 or 32 for images scaled down to 8, else 8). :class:`UnreadableImage` naming the file."""
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = PHOTO_PIXELS // 2  # Pillow refuses at twice this
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = open_upright(path)
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    return to_8bit(image)


def to_8bit(image: Image.Image) -> tuple[Image.Image, int]:
    """``image`` in 8-bit ``L``, ``RGB`` or ``RGBA`` (16-bit and 32-bit grey scaled by their full range, float grey
    read as 0..1 and clipped, as predict reads it; palettes and CMYK converted); and its bits per sample."""
    if image.mode in ("L", "RGB", "RGBA"):
        return image, 8
    if image.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        array = np.asarray(image, dtype=np.float64)
        bits = 16 if image.mode != "I" or array.max(initial=0) <= 65535 else 32
        array = np.clip(array, 0, 2 ** bits - 1) * (255 / (2 ** bits - 1))
        return Image.fromarray(np.round(array).astype(np.uint8), "L"), bits
    if image.mode == "F":  # as predict and training read it: 0..1, clipped (NaN as 0, infinities as the ends)
        array = np.clip(np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=1.0, neginf=0.0), 0, 1)
        return Image.fromarray(np.round(array * 255).astype(np.uint8), "L"), 32
    alpha = "A" in image.getbands() or "transparency" in image.info
    return image.convert("RGBA" if alpha else "RGB" if image.mode not in ("1", "LA") else "L"), 8


def oriented_size(path: Path) -> tuple[int, int, int]:
    """``(width, height, orientation)`` from the header: the size after the EXIF orientation is applied."""
    try:
        with _quiet(), Image.open(path) as image:
            width, height = image.size
            orientation = exif_orientation(image)
    except Exception as exc:  # noqa: BLE001
        raise UnreadableImage(f"{path}: cannot read image: {describe_read_error(exc)}") from None
    return (height, width, orientation) if orientation in SWAPS_SIDES else (width, height, orientation)


def exif_orientation(image: Image.Image) -> int:
    """The EXIF orientation (1-8; 1 = stored upright) of an opened, not yet loaded image.

    A PNG's orientation counts only when its eXIf chunk comes before the image
    data (where the PNG specification puts it), so the header alone decides
    the size that :func:`oriented_size` reports.
    """
    if image.format == "PNG" and "exif" not in image.info:
        return 1  # Pillow would decode the whole image to look for an eXIf chunk after the data
    if image.format == "TIFF" and pillow_orients_tiff():
        return 1  # this Pillow turns a TIFF upright itself (its size and pixels are already the upright ones)
    try:
        value = image.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block does not make the pixels unreadable
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def check_png(path: Path, data: bytes) -> None:
    """Refuse a PNG whose critical chunks (IHDR, PLTE, IDAT, IEND) fail their CRC-32, or that ends early."""
    offset, end = len(PNG_SIGNATURE), len(data)
    while True:
        if offset + 12 > end:
            raise UnreadableImage(f"{path}: cannot read image: truncated PNG (it ends at byte {end} without an "
                                  "IEND chunk); the file is incomplete: copy or export it again")
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        stop = offset + 8 + length
        if stop + 4 > end:
            raise UnreadableImage(f"{path}: cannot read image: truncated PNG (its {_chunk_name(kind)} chunk at "
                                  f"byte {offset} runs past the end); the file is incomplete: copy or export it again")
        critical = kind[:1].isupper()
        if critical and zlib.crc32(data[offset + 4:stop]) != struct.unpack(">I", data[stop:stop + 4])[0]:
            raise UnreadableImage(f"{path}: cannot read image: damaged PNG (the {_chunk_name(kind)} chunk at byte "
                                  f"{offset} fails its checksum); the file is corrupt: copy or export it again")
        if kind == b"IEND":
            return
        offset = stop + 4


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No stray lines while decoding: damaged metadata is one Pillow UserWarning per tag, and libtiff
    prints its own errors; the pixels decide, and a failure is one line (:class:`UnreadableImage`)."""
    _quiet_libtiff()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="PIL")
        yield


@functools.lru_cache(maxsize=None)
def _quiet_libtiff() -> None:
    """Stop libtiff printing its own error and warning lines on stderr (Pillow turns them into exceptions).

    Pillow bundles libtiff under a hashed name; the copy this process loaded is
    found in ``/proc/self/maps`` (Linux). Elsewhere libtiff keeps its messages.
    """
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libtiff" in line and ".so" in line}
        for path in paths:
            library = ctypes.CDLL(path)
            for name in ("TIFFSetErrorHandler", "TIFFSetWarningHandler"):
                setter = getattr(library, name)
                setter.argtypes, setter.restype = [ctypes.c_void_p], ctypes.c_void_p
                setter(None)
    except (OSError, AttributeError):
        pass


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UnreadableImage(f"{path}: cannot read image: {describe_read_error(exc)}") from None


def _pixels(image: Image.Image) -> np.ndarray:
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    elif image.mode in PIL_CONVERSIONS:
        image = image.convert(PIL_CONVERSIONS[image.mode])
    return np.asarray(image)


def _is_png16_colour(image: Image.Image) -> bool:
    tile = getattr(image, "tile", None)
    return image.format == "PNG" and bool(tile) and len(tile) == 1 and _tile_args(tile[0]) in (
        "RGB;16B", "RGBA;16B", "LA;16B")


def _tile_args(tile: Any) -> Any:
    """The decoder arguments of a tile: ``(codec, extents, offset, args)``, a named tuple from Pillow 11 on."""
    return tile[3]


def _png16_colour(image: Image.Image, data: bytes) -> np.ndarray:
    """A 16-bit colour (or grey+alpha) PNG at full depth, through Pillow's own decoder."""
    rawmode = _tile_args(image.tile[0])
    if rawmode == "LA;16B":  # 4 bytes per pixel: decoded as raw RGBA bytes (Lhi, Llo, Ahi, Alo)
        raw = _decode_as(data, "RGBA").astype(np.uint16)
        return np.stack([raw[..., 0] << 8 | raw[..., 1], raw[..., 2] << 8 | raw[..., 3]], axis=-1)
    high = np.asarray(image).astype(np.uint16)  # RGB;16B keeps the high byte of every sample
    low = _decode_as(data, rawmode.replace("16B", "16L"))  # ... 16L the other byte: here the low one
    return high << 8 | low


def _decode_as(data: bytes, rawmode: str) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        tile = image.tile[0]
        image.tile = [tile._replace(args=rawmode) if hasattr(tile, "_replace") else (*tile[:3], rawmode)]
        return np.asarray(image)


def _chunk_name(kind: bytes) -> str:
    return kind.decode("latin-1") if kind.isalpha() else repr(kind)


def describe_read_error(exc: BaseException) -> str:
    """Pillow's reason in one line, said plainly where Pillow's own words would puzzle."""
    if isinstance(exc, UnidentifiedImageError):  # its message names the in-memory buffer, not the file
        return "not an image file Pillow can read (unknown format, or a damaged header)"
    if isinstance(exc, PermissionError):
        return "permission denied; let this user read it (chmod a+r), or run as a user who may"
    if isinstance(exc, OSError) and exc.strerror:  # without the errno and the path, which the line names already
        return exc.strerror
    text = str(exc).strip().splitlines()
    reason = text[0] if text else type(exc).__name__
    if reason.startswith("decoder error") or reason in ("broken data stream when reading image file",
                                                        "unrecognized data stream contents when reading image file"):
        return f"damaged image data ({reason}); copy or export the file again"
    if reason.startswith("image file is truncated"):
        return f"{reason}; the file is incomplete: copy or export it again"
    return reason


def upright(image: Image.Image) -> Image.Image:
    """An opened (not yet loaded) Pillow image turned by its EXIF orientation, as :func:`read_pixels` does."""
    orientation = exif_orientation(image)
    if orientation == 1:
        return image.copy()
    T = Image.Transpose
    method = {2: T.FLIP_LEFT_RIGHT, 3: T.ROTATE_180, 4: T.FLIP_TOP_BOTTOM, 5: T.TRANSPOSE, 6: T.ROTATE_270,
              7: T.TRANSVERSE, 8: T.ROTATE_90}[orientation]
    return image.transpose(method)


def describe_orientation(value: int) -> str:
    """What an EXIF orientation does, in words (for ``data check``)."""
    return {2: "mirrored", 3: "rotated 180 degrees", 4: "flipped upside down", 5: "transposed",
            6: "rotated 90 degrees clockwise", 7: "transversed", 8: "rotated 90 degrees counter-clockwise"
            }.get(value, "upright")

"""Decode-once training data (``data.cache``): the split decoded once, each batch cut from it.

On a GPU a training step can take a few milliseconds, and DataLoader workers
that decode PNG/JPEG pairs every epoch cannot keep up. The cache runs the
deterministic part of a training sample once per split (decoding, channel
conversion, ``direction`` and the resize to ``load_size``: the dataset's own
code, so the pixels are the same) and keeps the results in host memory
(``memory``) or on the training device (``device``). Each batch then takes
the random part, the crop and the flips, and the normalisation to [-1, 1] as
tensor operations on the device the batch is needed on.

The random draws are the worker path's: for each sample, a generator seeded
with :func:`~.paired.sample_seed` (seed, epoch, index) draws the crop offsets
and flips in the order torchvision's transforms draw them, so a cached batch
is bit for bit the batch the workers give (``torch.equal``). Values are kept
as uint8 when the deterministic part yields exact 8-bit values (no resize, or
``resize_rounding: uint8``) and as float32 otherwise (a float resize's
fractions). uint8 values are normalised with the worker path's operations on
the CPU and, on CUDA, through a table those operations made on the CPU: CUDA
divides by a scalar through its reciprocal, which can differ in the last bit.
"""

from __future__ import annotations

import math
import os
import sys
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union

import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import tv_tensors

from nectargan_core import stop_signalled

from .augment import resize
from .decode import read_image, to_channels
from .domains import DOMAINS
from .errors import DatasetError
from .options import CACHED_AUGMENTATIONS, PairedDataOptions
from .paired import PairedDataset, sample_seed
from .sampler import EpochSampler
from .unpaired import UnpairedDataset
from .pixels import PIL_CONVERSIONS, UnreadableImage, _is_png16_colour, _quiet, describe_read_error, oriented_size

#: ``auto`` keeps the cache on the GPU when it takes at most this share of its free memory (the rest is
#: the networks', their activations' and the step's).
DEVICE_SHARE = 0.25
#: ``auto`` keeps the cache in host memory when it takes at most this share of MemAvailable.
HOST_SHARE = 0.5
#: Pillow modes whose samples are 8 bits (after the conversions :mod:`.pixels` makes).
EIGHT_BIT_MODES = frozenset({"1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "La", "CMYK", "YCbCr",
                             "LAB", "HSV"})
MIB = 1 << 20


# -- the decision ------------------------------------------------------------------
@dataclass(frozen=True)
class CacheChoice:
    """Where the cache lives (``off``, ``memory`` or ``device``) and, when auto fell back to off, why."""

    mode: str
    reason: Optional[str] = None


def choose_cache(requested: str, need: int, *, cuda: bool, free_device: Optional[int], free_host: Optional[int],
                 unsupported: Optional[str] = None, host_copies: int = 1) -> CacheChoice:
    """What ``data.cache: requested`` means for a cache of ``need`` bytes (a pure function: sizes are given).

    ``auto``: device on CUDA when ``need`` is at most DEVICE_SHARE of ``free_device``, else memory when at most
    HOST_SHARE of ``free_host``, else off with the reason. A CPU run too takes memory: a cached batch costs a
    fraction of the CPU of a decoded one (measured: docs/plugins/translate-data.md, "Decode-once cache").
    An explicit ``memory`` or ``device`` that does not fit at all raises a one-line :class:`DatasetError`;
    ``device`` on a CPU run is ``memory``. ``unsupported``: an augmentation the cache cannot apply (auto: off).
    ``host_copies``: processes of this run on this host, each caching the whole split (every rank's share
    changes every epoch), so host memory is judged for all of them together.
    """
    if requested == "off":
        return CacheChoice("off")
    asked = requested
    if requested == "device" and not cuda:
        requested = "memory"
    if requested == "auto":
        if unsupported is not None:
            return CacheChoice("off", f"{unsupported} is applied per sample, in the workers")
        if cuda and free_device is not None and need <= DEVICE_SHARE * free_device:
            return CacheChoice("device")
        if free_host is not None and need * host_copies <= HOST_SHARE * free_host:
            return CacheChoice("memory")
        room = [f"{DEVICE_SHARE:.0%} of free GPU memory ({mib(free_device)})"] if cuda and free_device else []
        if free_host is None:
            room.append("host memory of unknown size")
        else:
            processes = f", for {host_copies} processes" if host_copies > 1 else ""
            room.append(f"{HOST_SHARE:.0%} of available host memory ({mib(free_host)}{processes})")
        return CacheChoice("off", f"the decoded split ({mib(need)}) is more than {' or '.join(room)}")
    if requested == "device":
        free, where, total = free_device, "free GPU memory", need
    else:
        free, where, total = free_host, "available host memory", need * host_copies
    if free is not None and total > free:
        copies = f" ({host_copies} processes x {mib(need)})" if total != need else ""
        said = requested if asked == requested else f"{asked} (host memory on a run without CUDA)"
        raise DatasetError(f"data.cache: {said} needs {mib(total)}{copies} for the decoded training split but "
                           f"there is {mib(free)} of {where}; set data.cache: auto or off, or lower data.load_size "
                           "or data.max_images")
    return CacheChoice(requested)


def mib(size: Optional[int]) -> str:
    """A size for a message: KiB under 1 MiB, one decimal under 10 MiB."""
    if size is None:
        return "unknown"
    if size < MIB:
        return f"{size / 1024:.0f} KiB"
    return f"{size / MIB:,.0f} MiB" if size >= 10 * MIB else f"{size / MIB:.1f} MiB"


def available_host_memory() -> Optional[int]:
    """MemAvailable of /proc/meminfo in bytes (None where there is none: not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_device_memory(device: torch.device) -> Optional[int]:
    if device.type != "cuda":
        return None
    return torch.cuda.mem_get_info(device)[0]


def unsupported_augmentation(options: PairedDataOptions) -> Optional[str]:
    """The first augmentation a cached batch cannot apply, as ``augment.N (name)``; None when all can."""
    for index, spec in enumerate(options.augment):
        if spec.name not in CACHED_AUGMENTATIONS:
            return f"augment.{index} ({spec.name})"
    return None


# -- the estimate ------------------------------------------------------------------
def sources(dataset: Dataset) -> list[tuple[Path, bool, int]]:
    """What the split decodes: ``(file, half, channels)`` per image (``half``: one half of an aligned file)."""
    opts = dataset.options
    if isinstance(dataset, UnpairedDataset):
        return [(path, False, dataset.channels[domain]) for domain in DOMAINS for path in dataset.paths[domain]]
    found = []
    for pair in dataset.pairs:
        sides = [(pair.a, True), (pair.a, True)] if pair.b is None else [(pair.a, False), (pair.b, False)]
        if opts.direction == "BtoA":
            sides.reverse()
        found += [(path, half, want) for (path, half), want in zip(sides, (opts.in_channels, opts.out_channels))]
    return found


def estimate_bytes(dataset: Dataset) -> int:
    """Bytes the decoded split will take, from the options and image headers (nothing is decoded).

    uint8 values where they are exact 8-bit ones, float32 otherwise; see :func:`stored`.
    """
    opts = dataset.options
    images = sources(dataset)
    if opts.load_size is not None:
        value = 1 if opts.resize_rounding == "uint8" else 4
        return sum(channels for _, _, channels in images) * opts.load_size ** 2 * value
    values, exact = 0, True
    for path, half, want in images:
        width, height, bands, eight_bit = _header(path)
        exact = exact and eight_bit and not (want == 1 and bands >= 3)  # colour to grey gives fractions
        values += want * height * (width // 2 if half else width)
    return values * (1 if exact else 4)  # one dtype for the whole split


def _header(path: Path) -> tuple[int, int, int, bool]:
    """``(width, height, channels, eight_bit)`` of an image as it is read, from its header."""
    try:
        width, height, _ = oriented_size(path)
        with _quiet(), Image.open(path) as image:
            mode = "RGBA" if image.mode == "P" and "transparency" in image.info else image.mode
            mode = PIL_CONVERSIONS.get(mode, mode)
            eight_bit = mode in EIGHT_BIT_MODES and not _is_png16_colour(image)
            bands = Image.getmodebands(mode)
    except UnreadableImage as exc:
        raise DatasetError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types on a damaged header
        raise DatasetError(f"{path}: cannot read image: {describe_read_error(exc)}") from None
    return width, height, bands, eight_bit


# -- the decoded split -------------------------------------------------------------
def stored(image: torch.Tensor) -> torch.Tensor:
    """``image`` in [0, 1] as uint8 when its values are exactly ``k / 255`` (as 8-bit files give), else as is."""
    pixels = image.mul(255.0).round_().clamp_(0, 255).to(torch.uint8)
    return pixels if torch.equal(pixels.to(torch.float32) / 255.0, image) else image.clone()  # not a view of more


@dataclass(frozen=True)
class Cut:
    """One image of a sample: which decoded image, where the crop starts, and each augmentation's choice
    (0: not applied; else applied, and for rot90 the number of quarter turns)."""

    image: int
    top: int
    left: int
    flips: tuple[int, ...]


def draw_cut(generator: torch.Generator, image: int, shape: Sequence[int], options: PairedDataOptions) -> Cut:
    """The draws the worker path's transform makes for one image of ``shape`` (..., H, W), from ``generator``.

    Same calls in the same order as torchvision's: RandomCrop's top then left (each only when that side is
    larger than the crop), then per augmentation ``rand(1) >= p`` to skip it, and rot90's ``randint(1, 4)``
    on a square image (k = 2 otherwise, undrawn).
    """
    height, width = shape[-2:]
    top = left = 0
    crop = options.crop_size
    if crop is not None:
        if height > crop:
            top = int(torch.randint(0, height - crop + 1, size=(), generator=generator))
        if width > crop:
            left = int(torch.randint(0, width - crop + 1, size=(), generator=generator))
        height, width = min(height, crop), min(width, crop)
    flips = []
    for spec in options.augment:
        if torch.rand(1, generator=generator) >= spec.p:
            flips.append(0)
        elif spec.name == "rot90":
            flips.append(int(torch.randint(1, 4, (), generator=generator)) if height == width else 2)
        else:
            flips.append(1)
    return Cut(image, top, left, tuple(flips))


class DecodedSplit(ABC):
    """A training split after its deterministic steps: the images of each side (A, B) on ``device``.

    A subclass says what a sample is (:meth:`cuts`: which image of each side, and its draws) and what else
    a batch holds (:meth:`extras`); decoding, cutting, flipping and normalising are shared.
    """

    def __init__(self, dataset: Any, device: torch.device, *, mode: str) -> None:
        self.dataset = dataset
        self.options: PairedDataOptions = dataset.options
        self.mode = mode
        self.device = device
        load = self.options.load_size
        self._resize = resize(self.options, load) if load is not None else None
        self.images = self._decode_all(max(1, self.options.num_workers))
        if any(t.dtype != torch.uint8 for side in self.images.values() for t in side):  # one dtype per batch
            self.images = {name: [_float(t) for t in side] for name, side in self.images.items()}
        self.dtype = next((t.dtype for side in self.images.values() for t in side), torch.uint8)
        self.nbytes = sum(t.numel() * t.element_size() for side in self.images.values() for t in side)
        #: uint8 value -> normalised float32, made by the worker path's CPU operations (see the module), per device.
        self._tables: dict[torch.device, torch.Tensor] = {}

    # -- what a subclass says ------------------------------------------------------
    @abstractmethod
    def jobs(self) -> int:
        """How many decoding jobs the split takes."""

    @abstractmethod
    def decode(self, job: int) -> dict[str, torch.Tensor]:
        """The [0, 1] images of one job by side, before the resize (a damaged file: one DatasetError naming it)."""

    @abstractmethod
    def cuts(self, epoch: int, index: int) -> dict[str, Cut]:
        """Each side's image and draws for sample ``index`` in ``epoch``."""

    @abstractmethod
    def extras(self, indices: list[int], cuts: list[dict[str, Cut]]) -> dict[str, Any]:
        """The batch's entries besides A and B, as the default collate gives them."""

    @abstractmethod
    def name(self, side: str, image: int) -> str:
        """The file that image ``image`` of ``side`` comes from, as the batch names it."""

    @abstractmethod
    def counted(self) -> str:
        """What the split holds, for the summary."""

    # -- decoding ----------------------------------------------------------------------
    def _decode_all(self, threads: int) -> dict[str, list[torch.Tensor]]:
        """Every job, decoded by ``threads`` threads (Pillow and torch release the GIL while they work)."""
        total, show = self.jobs(), sys.stderr.isatty()
        images: dict[str, list[torch.Tensor]] = {"A": [], "B": []}
        with ThreadPoolExecutor(threads, thread_name_prefix="nectargan-cache") as pool:
            for done, decoded in enumerate(pool.map(self._decode_stored, range(total)), 1):
                if stop_signalled():  # Ctrl-C or SIGTERM before training: no step to finish, stop now
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise KeyboardInterrupt
                for side, image in decoded.items():
                    images[side].append(image)
                if show and (done % 64 == 0 or done == total):
                    print(f"\r  data cache: decoded {done}/{total}", end="", file=sys.stderr)
        if show and total:
            print(file=sys.stderr)
        return images

    def _decode_stored(self, job: int) -> dict[str, torch.Tensor]:
        decoded = self.decode(job)
        if self._resize is not None:
            decoded = {side: self._resize(tv_tensors.Image(x)).as_subclass(torch.Tensor) for side, x in decoded.items()}
        return {side: stored(x).to(self.device) for side, x in decoded.items()}

    def describe(self) -> str:
        return f"{self.mode}, {mib(self.nbytes)}, {self.counted()}"

    # -- one batch ---------------------------------------------------------------
    def batch(self, keys: Sequence[tuple[int, int]], target: torch.device) -> dict[str, Any]:
        """The collated batch of ``(epoch, index)`` keys, with A and B on ``target``."""
        indices = [index for _, index in keys]
        cuts = [self.cuts(epoch, index) for epoch, index in keys]
        batch: dict[str, Any] = {}
        for side in ("A", "B"):
            mine = [sample[side] for sample in cuts]
            x = self._gather(side, mine, target)
            for position, spec in enumerate(self.options.augment):
                _apply(spec.name, x, [cut.flips[position] for cut in mine])
            batch[side] = self._normalise(x)
        return {**batch, **self.extras(indices, cuts)}

    def _crop(self, image: torch.Tensor, cut: Cut) -> torch.Tensor:
        crop = self.options.crop_size
        if crop is None:
            return image
        return image[:, cut.top:cut.top + crop, cut.left:cut.left + crop]

    def _gather(self, side: str, cuts: list[Cut], target: torch.device) -> torch.Tensor:
        """The crops of ``side`` as one ``N x C x H x W`` tensor on ``target``: stacked where they are, then
        copied once (pinned); crops of different sizes are the worker path's one line naming two files."""
        crops = [self._crop(self.images[side][cut.image], cut) for cut in cuts]
        for cut, crop in zip(cuts[1:], crops[1:]):
            if crop.shape != crops[0].shape:
                got, want = tuple(crop.shape), tuple(crops[0].shape)
                raise DatasetError(f"{self.name(side, cut.image)} gives {side} of shape {got} but "
                                   f"{self.name(side, cuts[0].image)} {want}: images of different sizes cannot share "
                                   "a batch with resizing off; set data.load_size, or a batch size of 1")
        if crops[0].device == target:
            return torch.stack(crops)
        pin = target.type == "cuda" and self.options.pin_memory is not False  # data.pin_memory: null pins on CUDA
        staging = torch.empty((len(crops), *crops[0].shape), dtype=crops[0].dtype, pin_memory=pin)
        return torch.stack(crops, out=staging).to(target, non_blocking=True)

    def _normalise(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.uint8:  # x is this batch's own tensor: in place
            return x.clamp_(0.0, 1.0).mul_(2.0).sub_(1.0)
        if x.device.type == "cpu":  # the worker path's own operations, in place
            return x.to(torch.float32).div_(255.0).clamp_(0.0, 1.0).mul_(2.0).sub_(1.0)
        if x.device not in self._tables:
            self._tables[x.device] = unit_table().clamp(0.0, 1.0).mul(2.0).sub(1.0).to(x.device)
        return self._tables[x.device][x.long()]


class PairedCache(DecodedSplit):
    """A paired split: pair i is image i of A and of B, and one set of draws moves both (as the worker
    path's transform, called on the pair, does)."""

    dataset: PairedDataset

    def jobs(self) -> int:
        return len(self.dataset.pairs)

    def decode(self, job: int) -> dict[str, torch.Tensor]:
        a, b = self.dataset.load(self.dataset.pairs[job])
        return {"A": a, "B": b}

    def cuts(self, epoch: int, index: int) -> dict[str, Cut]:
        generator = torch.Generator().manual_seed(sample_seed(self.dataset.seed, epoch, index))
        cut = draw_cut(generator, index, self.images["A"][index].shape, self.options)
        return {"A": cut, "B": cut}

    def extras(self, indices: list[int], cuts: list[dict[str, Cut]]) -> dict[str, Any]:
        return {"path": [str(self.dataset.pairs[i].a) for i in indices],
                "index": torch.tensor(indices, dtype=torch.int64)}

    def name(self, side: str, image: int) -> str:
        return str(self.dataset.pairs[image].a)

    def counted(self) -> str:
        return f"{len(self.dataset.pairs)} pairs"


class UnpairedCache(DecodedSplit):
    """An unpaired split: item i takes A[i mod |A|] and a B drawn first (or B[i mod |B|] with ``serial``);
    then A's draws, then B's, each image transformed on its own (as the worker path's ``single`` does)."""

    dataset: UnpairedDataset

    def jobs(self) -> int:
        return sum(len(paths) for paths in self.dataset.paths.values())

    def decode(self, job: int) -> dict[str, torch.Tensor]:
        count = len(self.dataset.paths["A"])
        domain, position = ("A", job) if job < count else ("B", job - count)
        image = read_image(self.dataset.paths[domain][position])
        return {domain: to_channels(image, self.dataset.channels[domain])}

    def cuts(self, epoch: int, index: int) -> dict[str, Cut]:
        generator = torch.Generator().manual_seed(sample_seed(self.dataset.seed, epoch, index))
        a_count, b_count = len(self.images["A"]), len(self.images["B"])
        b = index % b_count if self.options.serial else int(torch.randint(b_count, (), generator=generator))
        a_cut = draw_cut(generator, index % a_count, self.images["A"][index % a_count].shape, self.options)
        return {"A": a_cut, "B": draw_cut(generator, b, self.images["B"][b].shape, self.options)}

    def extras(self, indices: list[int], cuts: list[dict[str, Cut]]) -> dict[str, Any]:
        return {"A_path": [self.name("A", cut["A"].image) for cut in cuts],
                "B_path": [self.name("B", cut["B"].image) for cut in cuts],
                "index": torch.tensor(indices, dtype=torch.int64)}

    def name(self, side: str, image: int) -> str:
        return str(self.dataset.paths[side][image])

    def counted(self) -> str:
        return f"{len(self.dataset.paths['A'])} A + {len(self.dataset.paths['B'])} B images"


def unit_table() -> torch.Tensor:
    """uint8 values 0-255 in [0, 1], computed as :func:`~.decode.to_unit` computes them (on the CPU)."""
    return torch.arange(256, dtype=torch.uint8).to(torch.float32) / 255.0


def _apply(name: str, x: torch.Tensor, choice: list[int]) -> None:
    """A paired augmentation on a batch, in place: sample i takes ``choice[i]`` (0: untouched, else a flip,
    or rot90's number of quarter turns). The choices are host values: nothing waits for the device."""
    def turned(t: torch.Tensor, k: int) -> torch.Tensor:
        return torch.rot90(t, k, dims=(-2, -1)) if name == "rot90" else t.flip(-1 if name == "hflip" else -2)

    for k in sorted(set(choice) - {0}):
        chosen = [i for i, c in enumerate(choice) if c == k]
        if len(chosen) == len(choice):
            x.copy_(turned(x, k))
            continue
        # Python indices, one sample at a time: an index tensor would be a copy from pageable host memory, and
        # such a copy waits for the GPU to finish its queued work (a host sync per batch).
        for i in chosen:
            x[i] = turned(x[i], k)


def _float(image: torch.Tensor) -> torch.Tensor:
    """uint8 to the float32 values decoding gives (through the table: exact on CUDA too)."""
    return unit_table().to(image.device)[image.long()] if image.dtype == torch.uint8 else image


# -- the loader --------------------------------------------------------------------
class CachedLoader:
    """A drop-in for the training DataLoader over a :class:`DecodedSplit`.

    The sampler is the DataLoader's (:class:`EpochSampler`: ``set_epoch``, ``skip``, ``shard``), batches
    are consecutive runs of ``batch_size`` of its keys (the last one short unless ``drop_last``), and a
    batch has the keys and types the default collate gives, with A and B on ``device``.
    """

    def __init__(self, cache: DecodedSplit, sampler: EpochSampler, *, batch_size: int, drop_last: bool,
                 device: torch.device) -> None:
        self.cache = cache
        self.dataset = cache.dataset
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.device = device

    def __len__(self) -> int:
        samples = len(self.sampler)
        return samples // self.batch_size if self.drop_last else math.ceil(samples / self.batch_size)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        keys = list(self.sampler)
        stop = len(keys) - len(keys) % self.batch_size if self.drop_last else len(keys)
        for start in range(0, stop, self.batch_size):
            yield self.cache.batch(keys[start:start + self.batch_size], self.device)


def cached_loader(dataset: Union[PairedDataset, UnpairedDataset], device: Optional[torch.device | str]
                  ) -> tuple[Optional[CachedLoader], CacheChoice]:
    """The cached training loader ``data.cache`` asks for and the choice made; no loader for the worker path
    (off, or auto that does not fit: then one line to stderr says why)."""
    opts = dataset.options
    target = torch.device(device if device is not None else "cpu")
    cuda = target.type == "cuda"
    if opts.cache == "off":
        return None, CacheChoice("off")
    if cuda and not torch.cuda.is_available():  # a loader built for CUDA on a machine without it (tests)
        return None, CacheChoice("off", "CUDA is not available here")
    if cuda and target.index is None:  # "cuda" is the current GPU; the cached tensors say cuda:N
        target = torch.device("cuda", torch.cuda.current_device())
    need = estimate_bytes(dataset)
    choice = choose_cache(opts.cache, need, cuda=cuda, free_device=free_device_memory(target) if cuda else None,
                          free_host=available_host_memory(), unsupported=unsupported_augmentation(opts),
                          host_copies=max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    if choice.mode == "off":
        if os.environ.get("RANK", "0") == "0":  # every process of a run decides alike: one line for the run
            where = "in the loader's workers" if opts.num_workers else "by the loader"
            print(f"data cache: off, training data is decoded {where} every epoch: {choice.reason}", file=sys.stderr)
        return None, choice
    home = target if choice.mode == "device" else torch.device("cpu")
    kind = UnpairedCache if isinstance(dataset, UnpairedDataset) else PairedCache
    cache = kind(dataset, home, mode=choice.mode)
    sampler = EpochSampler(len(dataset), shuffle=opts.shuffle, seed=dataset.seed)
    return CachedLoader(cache, sampler, batch_size=opts.batch_size, drop_last=opts.drop_last, device=target), choice


def cache_summary(loader: Any) -> str:
    """The training loader's cache for the run's start summary: ``device, 449 MiB, 960 pairs``, or ``off``
    (with auto's reason)."""
    if isinstance(loader, CachedLoader):
        return loader.cache.describe()
    choice = getattr(loader, "cache_choice", None)
    return f"off ({choice.reason})" if isinstance(choice, CacheChoice) and choice.reason else "off"

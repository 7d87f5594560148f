"""What a training position refers to: the train split's files, by name, size and modification time.

A mid-epoch checkpoint says "batch 3 of epoch 2"; that position means
something only for the listing whose permutation it walks. The trainer
records the listing of its train data in every checkpoint, and a resume
compares it with the listing the rebuilt dataset has now: the same names in
the same order keep the position; files added, removed or renamed make it a
different run (resume refuses mid-epoch unless told to go on); files that
only changed their contents keep the position with a warning.

A dataset tells the engine its files with a ``listing()`` method returning a
:class:`SplitListing` (``SplitListing.of_files(root, paths)``); a dataset
without one is compared by its length alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .text import printable

#: Names shown in one line before "and N more".
EXAMPLES = 2
#: Characters of one name shown (a crafted record may hold megabytes).
NAME_CHARS = 120


@dataclass(frozen=True)
class SplitListing:
    """The files a split's samples are drawn from, in sample order: names relative to the split's root,
    sizes in bytes and modification times in nanoseconds (-1 when a file could not be read)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    mtimes: tuple[int, ...]

    @classmethod
    def of_files(cls, root: str | Path, paths: Iterable[str | Path]) -> "SplitListing":
        """The listing of ``paths`` (in sample order), named relative to ``root`` so a moved dataset still matches."""
        names, sizes, mtimes = [], [], []
        base = Path(root)
        for path in paths:
            path = Path(path)
            try:
                name = path.relative_to(base).as_posix()
            except ValueError:
                name = path.as_posix()
            try:
                info = os.stat(path)
                size, mtime = int(info.st_size), int(info.st_mtime_ns)
            except OSError:
                size = mtime = -1
            names.append(name)
            sizes.append(size)
            mtimes.append(mtime)
        return cls(tuple(names), tuple(sizes), tuple(mtimes))

    def __len__(self) -> int:
        return len(self.names)

    def to_record(self) -> dict[str, list[Any]]:
        """Plain lists for a checkpoint (``torch.load(weights_only=True)`` reads them back)."""
        return {"names": list(self.names), "sizes": list(self.sizes), "mtimes": list(self.mtimes)}

    @classmethod
    def from_record(cls, record: Any) -> "SplitListing | None":
        """The listing a checkpoint recorded, or None when it holds none of the right shape (an older or crafted one)."""
        if not isinstance(record, Mapping):
            return None
        names, sizes, mtimes = (record.get(key) for key in ("names", "sizes", "mtimes"))
        if not (isinstance(names, list) and isinstance(sizes, list) and isinstance(mtimes, list)
                and len(names) == len(sizes) == len(mtimes)
                and all(isinstance(name, str) for name in names)
                and all(type(value) is int for value in (*sizes, *mtimes))):
            return None
        return cls(tuple(names), tuple(sizes), tuple(mtimes))

    def changes_since(self, saved: "SplitListing") -> "ListingChange":
        """How this (current) listing differs from ``saved``."""
        before = dict(zip(saved.names, zip(saved.sizes, saved.mtimes)))
        now = dict(zip(self.names, zip(self.sizes, self.mtimes)))
        removed = [name for name in saved.names if name not in now]
        added = [name for name in self.names if name not in before]
        # a file that left one name for another keeps its size and modification time
        gone = {before[name]: name for name in removed if before[name][0] >= 0}
        renamed = []
        for name in list(added):
            old = gone.pop(now[name], None)
            if old is not None and now[name][0] >= 0:
                renamed.append((old, name))
                added.remove(name)
                removed.remove(old)
        changed = [name for name in self.names if name in before and before[name] != now[name]]
        kept = [name for name in self.names if name in before]
        reordered = not (added or removed or renamed) and kept != [n for n in saved.names if n in now]
        return ListingChange(tuple(added), tuple(removed), tuple(renamed), tuple(changed), reordered,
                             len(saved), len(self))


@dataclass(frozen=True)
class ListingChange:
    """The difference between a recorded listing and the current one."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    renamed: tuple[tuple[str, str], ...]
    changed: tuple[str, ...]
    reordered: bool
    before: int
    now: int

    #: What ``before`` and ``now`` count: files (listings compared) or samples (only lengths known).
    unit: str = "file"

    @property
    def moves_position(self) -> bool:
        """Whether the samples' order differs: a mid-epoch position no longer points at the same samples."""
        return bool(self.added or self.removed or self.renamed or self.reordered or self.before != self.now)

    def __bool__(self) -> bool:
        return self.moves_position or bool(self.changed)

    def describe(self) -> str:
        """One phrase: ``2 added ('x.png', 'y.png'), 1 removed ('z.png'); 120 files then, 121 now``."""
        parts = []
        if self.added:
            parts.append(f"{len(self.added)} added ({examples(self.added)})")
        if self.removed:
            parts.append(f"{len(self.removed)} removed ({examples(self.removed)})")
        if self.renamed:
            pairs = [f"'{short(old)}' -> '{short(new)}'" for old, new in self.renamed[:EXAMPLES]]
            more = f" and {len(self.renamed) - EXAMPLES} more" if len(self.renamed) > EXAMPLES else ""
            parts.append(f"{len(self.renamed)} renamed ({', '.join(pairs)}{more})")
        if self.reordered:
            parts.append("the same files in another order (a changed setting such as data.direction)")
        if self.changed:
            parts.append(f"{len(self.changed)} with other contents (size or modification time: "
                         f"{examples(self.changed)})")
        unit = self.unit if self.before == 1 else f"{self.unit}s"
        counts = f"{self.before} {unit} then, {self.now} now" if self.before != self.now else f"{self.now} {unit}"
        return f"{', '.join(parts)}; {counts}" if parts else counts


@dataclass(frozen=True)
class TrainData:
    """What a checkpoint records about the train data its position refers to."""

    #: ``len`` of the train loader's dataset (None when it has none).
    samples: int | None
    #: Batches per epoch then (None when the loader has no length).
    batches: int | None
    #: The dataset's files (None when it does not list them).
    listing: SplitListing | None
    #: What fixes the order of each epoch: the sampler's ``(shuffle, seed)`` (None for another sampler).
    order: tuple[bool, int] | None = None

    @classmethod
    def of_loader(cls, loader: Any, batches: int | None) -> "TrainData":
        """The train data of ``loader`` (a DataLoader's ``dataset``, or the loader itself)."""
        data = getattr(loader, "dataset", loader)
        try:
            samples: int | None = len(data)
        except TypeError:
            samples = None
        return cls(samples, batches, listing_of(data), order_of(getattr(loader, "sampler", None)))

    def to_record(self) -> dict[str, Any]:
        return {"samples": self.samples, "batches": self.batches,
                "listing": self.listing.to_record() if self.listing is not None else None,
                "order": {"shuffle": self.order[0], "seed": self.order[1]} if self.order is not None else None}

    @classmethod
    def from_record(cls, record: Any) -> "TrainData | None":
        """What a checkpoint recorded, or None (a checkpoint from before this record, or a crafted one)."""
        if not isinstance(record, Mapping):
            return None
        samples, batches, listed = record.get("samples"), record.get("batches"), record.get("listing")
        listing = SplitListing.from_record(listed)
        ordered = record.get("order")
        order = ((ordered.get("shuffle"), ordered.get("seed")) if isinstance(ordered, Mapping) else None)
        if (listed is not None and listing is None) or not all(value is None or _count(value)
                                                                for value in (samples, batches)) \
                or (ordered is not None and not (order is not None and type(order[0]) is bool
                                                 and type(order[1]) is int)):
            return None  # damaged: nothing in it can be trusted
        return cls(samples, batches, listing, order)

    def reordered_since(self, saved: "TrainData") -> str | None:
        """``data.shuffle or run.seed changed (...)`` when the epochs' order is drawn otherwise than ``saved``'s."""
        if self.order is None or saved.order is None or self.order == saved.order:
            return None
        def say(order: tuple[bool, int]) -> str:
            return f"shuffled with seed {order[1]}" if order[0] else "not shuffled"
        return f"data.shuffle or run.seed changed: each epoch's order was {say(saved.order)}, now {say(self.order)}"

    def changes_since(self, saved: "TrainData") -> ListingChange | None:
        """How the data differs from ``saved``'s; None when nothing comparable differs."""
        if self.listing is not None and saved.listing is not None:
            change = self.listing.changes_since(saved.listing)
        elif self.samples is not None and saved.samples is not None and self.samples != saved.samples:
            change = ListingChange((), (), (), (), False, saved.samples, self.samples, unit="sample")
        else:
            return None
        return change if change else None


def order_of(sampler: Any) -> tuple[bool, int] | None:
    """A resumable sampler's ``(shuffle, seed)``, which with the epoch fix its order; None for another sampler."""
    shuffle, seed = getattr(sampler, "shuffle", None), getattr(sampler, "seed", None)
    if callable(getattr(sampler, "skip", None)) and type(shuffle) is bool and type(seed) is int:
        return shuffle, seed
    return None


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def short(name: str) -> str:
    """``name`` escaped for the terminal, its middle left out past NAME_CHARS characters."""
    text = printable(name)
    return text if len(text) <= NAME_CHARS else f"{text[:NAME_CHARS // 2]}...{text[-NAME_CHARS // 2:]}"


def examples(names: Sequence[str]) -> str:
    """``'a.png', 'b.png' and 3 more``: a few names, escaped for the terminal."""
    shown = ", ".join(f"'{short(name)}'" for name in names[:EXAMPLES])
    return shown + (f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else "")


def listing_of(data: Any) -> SplitListing | None:
    """``data.listing()`` when the dataset offers one (and it returns a SplitListing), else None."""
    method = getattr(data, "listing", None)
    if not callable(method):
        return None
    listing = method()
    if listing is not None and not isinstance(listing, SplitListing):
        raise TypeError(f"{type(data).__name__}.listing() returned {type(listing).__name__}, not a SplitListing")
    return listing

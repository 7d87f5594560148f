"""The image pools: each discriminator judges a history of generated images, not only the newest.

As in the reference (after Shrivastava et al., 2017): until a pool holds
``size`` images, every fake it is given is stored and passed on; after that,
each fake is passed on as it is with probability 0.5, and otherwise swapped
for a stored fake chosen at random, which it replaces in the pool.

The draws come from one :class:`PoolRandom` that the trainer's two pools
share: a ``random.Random`` (the generator behind Python's ``random`` module,
which the reference's pools draw from), seeded from the run seed and tracked
in checkpoints with the pools' contents, so a resumed run draws what the
uninterrupted one would have. Seeded alike, the pools draw exactly what the
reference's draw when they are queried in the reference's order
(``fake_B`` first, then ``fake_A``).

A query is split in two, so that a training step captured in a CUDA graph
replays it: :meth:`ImagePool.plan`, on the host before the step (the
trainer's ``prepare_step``), makes the draws and writes the decisions into a
small device tensor in place; :meth:`ImagePool.query`, inside the step, only
runs fixed tensor ops that those decisions steer, on images held in one
preallocated tensor. Which decision an image gets depends only on the draws
and on how many images the pool holds, a count the host keeps, so the plan
needs no look at the images.

In a distributed run every process keeps the same pools of the whole
batch's fakes (see :meth:`ImagePool.query`), as one process with the whole
batch would: the run behaves the same on any number of processes, and the
checkpoint written by rank 0 holds every process's pools.
"""

from __future__ import annotations

import random
from typing import Any, Mapping

import torch


class PoolRandom(random.Random):
    """A ``random.Random`` whose state travels in checkpoints (``track`` it)."""

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss_next = self.getstate()
        return {"version": version, "internal": list(internal), "gauss_next": gauss_next}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.setstate((state["version"], tuple(state["internal"]), state["gauss_next"]))


#: The rows of a plan: per image, the slot it reads (and may write), whether it is stored, whether it is swapped.
SLOT, STORE, TAKE = range(3)


class ImagePool:
    """A buffer of up to ``size`` generated images on ``device`` (``size`` 0: fakes pass straight through).

    ``buffer`` (``size`` images, allocated at the first query or load) holds
    the stored images in its first ``count`` slots; ``count`` is kept on the
    host and advanced by :meth:`plan`, never read back from the device.
    """

    def __init__(self, size: int, rng: random.Random, device: torch.device | str = "cpu") -> None:
        self.size = size
        self.rng = rng
        self.device = torch.device(device)
        self.count = 0
        self.buffer: torch.Tensor | None = None
        # Per batch length: the device plan, written in place, so a captured step reads each step's plan.
        self._plans: dict[int, torch.Tensor] = {}
        self._plan: torch.Tensor | None = None  # the plan the next query follows

    def __len__(self) -> int:
        return self.count

    @property
    def images(self) -> list[torch.Tensor]:
        """The stored images in slot order, one ``(1, C, H, W)`` view each (for inspection; they alias the pool)."""
        return list(self.buffer[:self.count].split(1)) if self.count and self.buffer is not None else []

    def plan(self, count: int) -> None:
        """Draw the decisions for the next query's ``count`` images (in a distributed run, the whole batch's).

        The draws are the reference's, in its order: none while the pool
        fills, then per image ``uniform(0, 1) > 0.5`` and, when true,
        ``randint(0, size - 1)``. Host only; call it outside a captured step.
        """
        if self.size == 0:
            return
        rows: list[list[int]] = [[0] * count for _ in range(3)]
        for i in range(count):
            if self.count < self.size:
                rows[SLOT][i], rows[STORE][i] = self.count, 1
                self.count += 1
            elif self.rng.uniform(0, 1) > 0.5:
                rows[SLOT][i] = self.rng.randint(0, self.size - 1)
                rows[STORE][i] = rows[TAKE][i] = 1
        decided = torch.tensor(rows, dtype=torch.int64)
        if count not in self._plans:
            self._plans[count] = torch.empty_like(decided, device=self.device)
        plan = self._plans[count]
        if self.device.type == "cuda":
            # A fresh pinned tensor each step: torch's caching host allocator keeps its block until the copy has
            # read it, so the host never waits for the GPU here (a reused staging tensor would need a wait).
            plan.copy_(decided.pin_memory(), non_blocking=True)
        else:
            plan.copy_(decided)
        self._plan = plan

    def query(self, images: torch.Tensor, dist: Any = None) -> torch.Tensor:
        """The fakes D should judge for the batch ``images`` (detached), updating the pool as planned.

        ``dist`` (the trainer's :class:`~nectargan_core.distributed.Distributed`):
        in a distributed run every process gathers the whole batch's fakes, in
        the order one process with the whole batch would hold them (sample
        ``j`` of rank ``r`` is sample ``j * world_size + r`` there, as
        :meth:`~nectargan_core.ResumableSampler.shard` deals them), queries its
        copy of the pool with them, and keeps its own samples of the answer.
        """
        images = images.detach()
        if self.size == 0:
            return images
        if dist is None or not dist.enabled:
            return self._query(images)
        world, count, shape = dist.world_size, images.shape[0], images.shape[1:]
        everyone = dist.all_gather(images)
        ordered = everyone.view(world, count, *shape).transpose(0, 1).reshape(world * count, *shape)
        return self._query(ordered).view(count, world, *shape)[:, dist.rank]

    def _query(self, images: torch.Tensor) -> torch.Tensor:
        """Fixed tensor ops, one image after another (two images may draw one slot), no host reads or draws."""
        count = images.shape[0]
        plan = self._plan
        if plan is None or plan.shape[1] != count:
            raise RuntimeError(f"ImagePool.query: no plan for {count} images; call plan({count}) before the step "
                               "(the CycleGAN trainer does in prepare_step)")
        self._plan = None  # a plan is followed once: a second query would desynchronise the host count
        if self.buffer is None:
            self.buffer = self._allocate(images, images.device)
        elif self.buffer.dtype != images.dtype:  # e.g. a resume under other precision settings
            self.buffer = self.buffer.to(torch.promote_types(self.buffer.dtype, images.dtype))
        flags = (-1, *([1] * (images.dim() - 1)))
        slots, store, take = plan[SLOT], plan[STORE].bool().view(flags), plan[TAKE].bool().view(flags)
        returned = []
        for i in range(count):
            image, slot = images[i:i + 1], slots[i:i + 1]
            stored = self.buffer.index_select(0, slot)
            returned.append(torch.where(take[i], stored, image))
            self.buffer.index_copy_(0, slot, torch.where(store[i], image, stored).to(self.buffer.dtype))
        return torch.cat(returned)

    def _allocate(self, like: torch.Tensor, device: torch.device) -> torch.Tensor:
        """A buffer for ``size`` images like ``like``'s, in their memory format.

        Zeroed, not empty: a step that fails between its plan and its query
        leaves ``count`` ahead of the images written, and an emergency
        checkpoint then saves zeros there, not whatever the memory held.
        """
        channels_last = like.dim() == 4 and like.is_contiguous(memory_format=torch.channels_last) \
            and not like.is_contiguous()
        buffer = torch.zeros((self.size, *like.shape[1:]), dtype=like.dtype, device=device)
        return buffer.contiguous(memory_format=torch.channels_last) if channels_last else buffer

    # -- state: the list-based pool's format, so checkpoints from before and after the buffer load both ways ---
    def state_dict(self) -> dict[str, Any]:
        stored = self.buffer[:self.count].clone() if self.count and self.buffer is not None else torch.empty(0)
        return {"size": self.size, "images": stored}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stored = state["images"][:self.size]  # an empty pool saves torch.empty(0): no images either way
        self.count, self._plan = len(stored), None
        if not self.count:
            return
        if self.buffer is None or self.buffer.shape[1:] != stored.shape[1:] or self.buffer.dtype != stored.dtype:
            self.buffer = self._allocate(stored, self.device)
        self.buffer[:self.count].copy_(stored)  # in place: a captured step keeps reading this buffer

    def snapshot(self) -> tuple[int, torch.Tensor | None]:
        """What a step may change in the buffer and count (for ``loop.nonfinite: skip``); take it before ``plan``."""
        return self.count, self.buffer[:self.count].clone() if self.count and self.buffer is not None else None

    def restore(self, snapshot: tuple[int, torch.Tensor | None]) -> None:
        """Put the pool back as :meth:`snapshot` found it (slots past ``count`` are written before they are read)."""
        self.count, stored = snapshot
        if stored is not None:
            self.buffer[:self.count].copy_(stored)
        self._plan = None

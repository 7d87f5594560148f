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


class ImagePool:
    """A buffer of up to ``size`` generated images on ``device`` (``size`` 0: fakes pass straight through)."""

    def __init__(self, size: int, rng: random.Random, device: torch.device | str = "cpu") -> None:
        self.size = size
        self.rng = rng
        self.device = torch.device(device)
        self.images: list[torch.Tensor] = []

    def __len__(self) -> int:
        return len(self.images)

    def query(self, images: torch.Tensor, dist: Any = None) -> torch.Tensor:
        """The fakes D should judge for the batch ``images`` (detached), updating the pool.

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
        returned = []
        for image in images:
            image = image.unsqueeze(0).clone()
            if len(self.images) < self.size:
                self.images.append(image)
                returned.append(image)
            elif self.rng.uniform(0, 1) > 0.5:
                slot = self.rng.randint(0, self.size - 1)
                returned.append(self.images[slot])
                self.images[slot] = image
            else:
                returned.append(image)
        return torch.cat(returned)

    def state_dict(self) -> dict[str, Any]:
        stored = torch.cat(self.images) if self.images else torch.empty(0)
        return {"size": self.size, "images": stored}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stored = state["images"]
        images = [image.to(self.device) for image in stored.split(1)] if stored.numel() else []
        self.images = images[:self.size]

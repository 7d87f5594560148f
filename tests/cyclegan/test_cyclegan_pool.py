"""The image pools, planned on the host and queried with fixed tensor ops, against the list-based pool they replace.

``ListPool`` is the pool as it was before the draws moved to ``prepare_step``
(a Python list, drawing inside ``query``): the oracle for the returned
images, the stored images and the draws, and for the checkpoint format.
"""

from __future__ import annotations

import io
import random

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from nectargan_cyclegan.pool import ImagePool, PoolRandom


class ListPool:
    """The list-based pool (and its checkpoint format) as it was: draws and decisions inside ``query``."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size, self.rng, self.images = size, rng, []
        self.slots: list[list[int]] = []  # the slots each query drew, to show that batches draw one slot twice

    def query(self, images: torch.Tensor) -> torch.Tensor:
        if self.size == 0:
            return images
        returned, drawn = [], []
        for image in images:
            image = image.unsqueeze(0).clone()
            if len(self.images) < self.size:
                self.images.append(image)
                returned.append(image)
            elif self.rng.uniform(0, 1) > 0.5:
                slot = self.rng.randint(0, self.size - 1)
                drawn.append(slot)
                returned.append(self.images[slot])
                self.images[slot] = image
            else:
                returned.append(image)
        self.slots.append(drawn)
        return torch.cat(returned)

    def state_dict(self) -> dict:
        return {"size": self.size, "images": torch.cat(self.images) if self.images else torch.empty(0)}

    def load_state_dict(self, state) -> None:
        stored = state["images"]
        self.images = (list(stored.split(1)) if stored.numel() else [])[:self.size]


def planned_query(pool: ImagePool, images: torch.Tensor) -> torch.Tensor:
    pool.plan(len(images))
    return pool.query(images)


def assert_same_pool(pool: ImagePool, reference: ListPool) -> None:
    assert len(pool) == len(reference.images)
    for ours, theirs in zip(pool.images, reference.images, strict=True):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_planned_queries_return_and_store_what_the_list_pool_does(size):
    batches = random.Random(size)  # the batches' lengths, 1 to 4; the images are all different
    pool, reference = ImagePool(size, PoolRandom(7)), ListPool(size, PoolRandom(7))
    generator = torch.Generator().manual_seed(size)
    for step in range(300):
        images = torch.randn(batches.randint(1, 4), 3, 4, 4, generator=generator)
        expected = reference.query(images)
        returned = planned_query(pool, images)
        assert torch.equal(returned, expected), step
        assert_same_pool(pool, reference)
        if step == 0:
            buffer = pool.buffer.data_ptr()
        assert pool.buffer.data_ptr() == buffer  # allocated once: a captured step keeps reading it
    assert pool.rng.getstate() == reference.rng.getstate()  # the same draws, no more
    assert any(len(set(slots)) < len(slots) for slots in reference.slots)  # two images of a batch drew one slot


def test_the_two_pools_share_one_stream_in_the_reference_order():
    ours, theirs = PoolRandom(3), PoolRandom(3)
    pools, references = [ImagePool(2, ours) for _ in "AB"], [ListPool(2, theirs) for _ in "AB"]
    for step in range(20):
        images = [torch.randn(2, 1, 2, 2) for _ in "AB"]
        for pool, image in zip(pools, images):  # the trainer plans both before the step, then queries both
            pool.plan(len(image))
        for pool, reference, image in zip(pools, references, images):
            assert torch.equal(pool.query(image), reference.query(image)), step
    assert ours.getstate() == theirs.getstate()


def test_size_0_passes_images_through_without_drawing():
    rng = PoolRandom(0)
    state, pool, images = rng.getstate(), ImagePool(0, rng), torch.randn(3, 3, 4, 4)
    assert torch.equal(planned_query(pool, images), images)
    assert rng.getstate() == state and len(pool) == 0 and pool.state_dict()["images"].numel() == 0


def test_a_query_without_its_plan_is_refused():
    pool = ImagePool(2, PoolRandom(0))
    with pytest.raises(RuntimeError, match=r"call plan\(3\)"):
        pool.query(torch.randn(3, 1, 2, 2))
    pool.plan(2)
    with pytest.raises(RuntimeError, match=r"no plan for 3 images"):
        pool.query(torch.randn(3, 1, 2, 2))


class HostReads(TorchDispatchMode):
    """Fails on any read of a tensor's value by the host (``item``, ``bool``, ``int``: ``_local_scalar_dense``)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default):
            raise AssertionError(f"host read: {func}")
        return func(*args, **(kwargs or {}))


class NoDraws:
    def __getattr__(self, name):
        raise AssertionError(f"a draw in query: rng.{name}")


@pytest.fixture
def no_host_reads(monkeypatch):
    """Inside: a host read of a tensor's value raises, through the dispatcher or the Python conversions."""
    for name in ("tolist", "numpy", "item", "__bool__", "__int__", "__float__", "__index__"):
        def refuse(*args, name=name, **kwargs):
            raise AssertionError(f"host read: Tensor.{name}")
        monkeypatch.setattr(torch.Tensor, name, refuse)
    return HostReads


def test_the_guard_catches_host_reads(no_host_reads):
    flag = torch.ones(1)
    for read in (bool, int, float, torch.Tensor.item, torch.Tensor.tolist):
        with pytest.raises(AssertionError, match="host read"), no_host_reads():
            read(flag)
    with pytest.raises(AssertionError, match="host read"), no_host_reads():
        torch.ops.aten.item(flag)  # past the Python conversions, the dispatcher still sees it


def test_query_reads_nothing_back_and_draws_nothing(no_host_reads):
    rng = PoolRandom(5)
    pool, reference = ImagePool(2, rng), ListPool(2, PoolRandom(5))
    for step in range(30):
        images = torch.randn(3, 2, 4, 4)
        expected = reference.query(images)
        pool.plan(len(images))
        pool.rng = NoDraws()
        with no_host_reads():
            returned = pool.query(images)
        pool.rng = rng
        assert torch.equal(returned, expected), step


def test_a_list_pool_checkpoint_loads_and_continues_alike():
    stored = [torch.randn(1, 3, 4, 4) for _ in range(4)]
    for size, count in ((3, 2), (3, 4), (3, 0)):  # filling, one bigger than the pool (cut, as before), empty
        reference = ListPool(size, PoolRandom(1))
        reference.images = [image.clone() for image in stored[:count]]
        saved = io.BytesIO()
        torch.save({"fake_A_pool": reference.state_dict()}, saved)  # by hand: the list pool's format
        saved.seek(0)
        pool = ImagePool(size, PoolRandom(1))
        pool.load_state_dict(torch.load(saved)["fake_A_pool"])
        reference.load_state_dict(reference.state_dict())
        assert_same_pool(pool, reference)
        for step in range(10):
            images = torch.randn(2, 3, 4, 4)
            assert torch.equal(planned_query(pool, images), reference.query(images)), (size, count, step)
        assert_same_pool(pool, reference)


def test_a_checkpoint_loads_into_the_list_pool_and_continues_alike():
    for queries in (0, 1, 6):  # empty, filling, full
        pool = ImagePool(3, PoolRandom(2))
        for _ in range(queries):
            planned_query(pool, torch.randn(2, 3, 4, 4))
        state = pool.state_dict()
        assert set(state) == {"size", "images"} and state["size"] == 3
        assert state["images"].shape == ((len(pool), 3, 4, 4) if len(pool) else (0,))
        reference = ListPool(3, PoolRandom(0))
        reference.load_state_dict(state)
        reference.rng.setstate(pool.rng.getstate())
        assert_same_pool(pool, reference)
        for step in range(10):
            images = torch.randn(2, 3, 4, 4)
            assert torch.equal(planned_query(pool, images), reference.query(images)), (queries, step)


def test_a_restored_snapshot_takes_back_the_step():
    rng = PoolRandom(4)
    pool, reference = ImagePool(3, rng), ListPool(3, PoolRandom(4))
    for step in range(8):
        images = torch.randn(2, 1, 2, 2)
        before, state = pool.snapshot(), rng.getstate()
        planned_query(pool, torch.full((2, 1, 2, 2), float("nan")))  # a bad step, taken back
        pool.restore(before)
        rng.setstate(state)
        assert torch.equal(planned_query(pool, images), reference.query(images)), step
        assert_same_pool(pool, reference)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_captured_query_replays_each_steps_plan():
    device = torch.device("cuda")
    pool, reference = ImagePool(3, PoolRandom(9), device), ListPool(3, PoolRandom(9))
    static = torch.zeros(2, 3, 8, 8, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # eager steps first, as the engine's: the buffer is allocated, the pool fills
        for _ in range(3):
            images = torch.randn(2, 3, 8, 8)
            static.copy_(images)
            assert torch.equal(planned_query(pool, static).cpu(), reference.query(images))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    pool.plan(2)
    torch.cuda.set_sync_debug_mode("error")  # a synchronising call in the query raises
    try:
        with torch.cuda.graph(graph):
            out = pool.query(static)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    images = torch.randn(2, 3, 8, 8)
    static.copy_(images)
    graph.replay()  # capture ran nothing: this runs the captured step, with the plan drawn for it
    assert torch.equal(out.cpu(), reference.query(images))
    for step in range(20):
        images = torch.randn(2, 3, 8, 8)
        static.copy_(images)
        pool.plan(2)
        graph.replay()
        assert torch.equal(out.cpu(), reference.query(images)), step
        for ours, theirs in zip(pool.images, reference.images, strict=True):
            assert torch.equal(ours.cpu(), theirs), step
    # Steps queued behind a busy GPU, no sync between them: each plan reaches the device intact (the pinned
    # staging tensor is not rewritten while its copy is pending).
    batches = torch.randn(30, 2, 3, 8, 8)
    on_device, outs = batches.to(device), []
    torch.cuda.synchronize()
    for step in range(30):
        torch.cuda._sleep(2_000_000)
        static.copy_(on_device[step])
        pool.plan(2)
        graph.replay()
        outs.append(out.clone())
    for step in range(30):
        assert torch.equal(outs[step].cpu(), reference.query(batches[step])), step
    assert pool.rng.getstate() == reference.rng.getstate()

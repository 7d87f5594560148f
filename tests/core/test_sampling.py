"""ResumableSampler: the order of an epoch, mid-epoch skips, and sharding across processes."""

from __future__ import annotations

import pytest

from nectargan_core.sampling import ResumableSampler


@pytest.mark.parametrize("length, world", [(10, 2), (11, 2), (7, 3), (3, 4)])
def test_shards_cover_the_epoch_like_distributed_sampler(length: int, world: int) -> None:
    full = ResumableSampler(length, seed=5)
    full.set_epoch(3)
    shards = []
    for rank in range(world):
        sampler = ResumableSampler(length, seed=5)
        sampler.shard(world, rank)
        sampler.set_epoch(3)
        shards.append(list(sampler))
    per_rank = -(-length // world)
    assert all(len(shard) == per_rank for shard in shards)  # equal steps on every rank
    interleaved = [shard[i] for i in range(per_rank) for shard in shards]
    order = list(full)
    assert interleaved[:length] == order  # step k of all ranks = samples k*world .. of one process
    assert interleaved[length:] == order[: per_rank * world - length]  # padding repeats the start


def test_a_shard_skips_its_own_samples_on_resume() -> None:
    sampler = ResumableSampler(10, seed=1)
    sampler.shard(2, 1)
    sampler.set_epoch(0)
    whole = list(sampler)
    sampler.skip(2)
    assert len(sampler) == 3
    assert list(sampler) == whole[2:]
    assert list(sampler) == whole  # the skip applies once


def test_epochs_differ_and_repeat() -> None:
    sampler = ResumableSampler(20, seed=0)
    sampler.shard(2, 0)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first


def test_a_rank_outside_the_world_is_refused() -> None:
    with pytest.raises(ValueError, match="rank 2 is not in"):
        ResumableSampler(4).shard(2, 2)

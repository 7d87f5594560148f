"""The Distributed object alone: no-ops for one process, clear errors for impossible settings."""

from __future__ import annotations

import pytest
import torch

from nectargan_core.config import DistributedSection
from nectargan_core.distributed import Distributed
from nectargan_core.errors import ConfigError
from nectargan_core.launch import describe_exit


def test_a_single_process_needs_no_process_group(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    alone = Distributed.from_environment(DistributedSection(), "cpu")
    assert (alone.enabled, alone.is_main, alone.world_size, alone.rank) == (False, True, 1, 0)
    net = torch.nn.Linear(2, 2)
    assert alone.wrap(net, sync_batchnorm=True) is net
    value = torch.tensor([1.5, 2.5])
    assert alone.all_mean(value) is value
    assert alone.any_true(True) is True and alone.any_true(False) is False
    assert alone.broadcast({"a": 1}) == {"a": 1}
    assert alone.gather("x") == ["x"]
    assert alone.device(torch.device("cpu")) == torch.device("cpu")


def test_sync_batchnorm_on_cpu_is_a_config_error() -> None:
    two = Distributed(world_size=2, rank=0)
    with pytest.raises(ConfigError, match=r"distributed.sync_batchnorm: SyncBatchNorm runs on CUDA only"):
        two.wrap(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2)), sync_batchnorm=True)


def test_nccl_without_cuda_is_a_config_error(monkeypatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match="distributed.backend: nccl needs CUDA devices"):
        Distributed.from_environment(DistributedSection(backend="nccl"), "cpu")


def test_bad_backend_and_timeout_are_refused() -> None:
    with pytest.raises(ValueError):
        DistributedSection(backend="mpi")
    with pytest.raises(ValueError):
        DistributedSection(timeout_s=0)


@pytest.mark.parametrize("code, text", [(-9, "killed by SIGKILL"), (1, "exit code 1"), (-200, "killed by signal 200")])
def test_exit_descriptions(code: int, text: str) -> None:
    assert describe_exit(code) == text


def test_a_quoted_torch_error_loses_its_cpp_source_locations() -> None:
    """gloo's "Connection closed by peer" reached a user line with its C++ file name and sign-off."""
    from nectargan_core.distributed import first_line

    error = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed "
                         "by peer [127.0.0.1]:20395. GLHF! \U0001f3d6\ufe0f\nmore")
    assert first_line(error) == "Connection closed by peer [127.0.0.1]:20395."
    assert first_line(RuntimeError("\n[x.cpp:3] \n")) == "RuntimeError"

"""Reading event files back the way TensorBoard does (a plain module, so test files can import it)."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import IMAGES, SCALARS, TENSORS, EventAccumulator
from tensorboard.plugins.hparams import metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import SessionStartInfo


def read_events(log_dir: Path) -> EventAccumulator:
    """Every event under ``log_dir``, unsampled, with TensorBoard's purge rules applied."""
    assert any(log_dir.glob("events.out.tfevents.*")), f"no event file in {log_dir}"
    return EventAccumulator(str(log_dir), size_guidance={SCALARS: 0, IMAGES: 0, TENSORS: 0}).Reload()


def scalar_steps(events: EventAccumulator, tag: str) -> list[int]:
    return [event.step for event in events.Scalars(tag)]


def config_texts(events: EventAccumulator) -> list[tuple[int, str]]:
    """(step, text) of each ``config`` text summary."""
    return [(event.step, event.tensor_proto.string_val[0].decode()) for event in events.Tensors("config")]


def session_start(events: EventAccumulator) -> SessionStartInfo:
    """The hparams the HParams dashboard shows for this run."""
    content = events.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG]
    return metadata.parse_session_start_info_plugin_data(content)

"""The parts that need no server: the queue, the board's windows, the options, the plugin module."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time

import pytest
from pydantic import ValidationError

from nectargan_visdom.board import MARKERS_UP_TO, Board, Curves
from nectargan_visdom.options import VisdomOptions
from nectargan_visdom.server import missing_assets
from nectargan_visdom.updates import ImageUpdate, LogUpdate, UpdateQueue, ValidationUpdate
from support import ROOT

#: As the pix2pix trainer logs them: D's total is its one term, so the window shows it once.
PIX2PIX_LOSSES = {"G/gan": 0.7, "G/l1": 31.0, "G/total": 31.7, "G/l1.raw": 0.31, "G/l1.weight": 100.0,
                  "D/gan_d": 0.69, "D/total": 0.69}


def test_full_queue_drops_the_oldest_update_and_counts_it():
    queue = UpdateQueue(3)
    for x in range(5):
        queue.put(LogUpdate(float(x), {"loss": x}, None))
    assert queue.dropped == 2
    assert [update.x for update in queue.take_all(0)] == [2.0, 3.0, 4.0]
    assert queue.take_all(0) == []


def test_put_never_waits_for_the_consumer():
    queue = UpdateQueue(10)
    start = time.perf_counter()
    for x in range(20_000):
        queue.put(LogUpdate(float(x), {"loss": 1.0}, None))
    assert time.perf_counter() - start < 1.0
    assert queue.dropped == 20_000 - 10


def test_close_wakes_a_waiting_consumer():
    queue = UpdateQueue(4)
    taken = []
    consumer = threading.Thread(target=lambda: taken.append(queue.take_all(None)))
    consumer.start()
    time.sleep(0.05)
    queue.close()
    consumer.join(2)
    assert not consumer.is_alive() and taken == [[]] and queue.closed


def test_losses_get_one_window_per_network_and_skip_detail_keys():
    board = Board(VisdomOptions(), config_html="<pre>x</pre>")
    board.apply(LogUpdate(0.5, PIX2PIX_LOSSES, {"opt_g": 2e-4, "opt_d": 2e-4}))
    board.apply(LogUpdate(1.0, PIX2PIX_LOSSES, {"opt_g": 1e-4, "opt_d": 1e-4}))
    assert list(board.windows) == ["config", "loss_G", "loss_D", "lr"]
    assert set(board.windows["loss_G"].series) == {"G/gan", "G/l1", "G/total"}
    assert board.windows["loss_D"].series == {"D/total": ([0.5, 1.0], [0.69, 0.69])}
    assert board.windows["lr"].series["opt_g"] == ([0.5, 1.0], [2e-4, 1e-4])


def test_detail_keys_and_switches():
    board = Board(VisdomOptions(details=True, lr=False, config=False))
    board.apply(LogUpdate(0.5, PIX2PIX_LOSSES, {"opt_g": 2e-4}))
    assert list(board.windows) == ["loss_G", "loss_D"]
    assert set(board.windows["loss_G"].series) == {"G/gan", "G/l1", "G/total", "G/l1.raw", "G/l1.weight"}


def test_unprefixed_losses_share_one_window_and_validation_gets_one_per_metric():
    board = Board(VisdomOptions())
    board.apply(LogUpdate(0.5, {"loss": 1.0, "noise": 0.5}, None))
    board.apply(ValidationUpdate(1.0, {"psnr": 21.0, "val/ssim": 0.5}))
    assert list(board.windows) == ["loss", "val_psnr", "val_ssim"]
    assert board.windows["val_ssim"].opts["title"] == "val/ssim"


def test_non_finite_values_become_gaps():
    curves = Curves("loss", "losses", "loss")
    curves.add(0.5, {"a": float("inf"), "b": "text"})
    xs, ys = curves.series["a"]
    assert xs == [0.5] and math.isnan(ys[0]) and "b" not in curves.series


def test_every_window_with_content_is_redrawn_after_a_reconnection(tmp_path):
    board = Board(VisdomOptions(), config_html="<pre>x</pre>")
    board.apply(LogUpdate(0.5, {"loss": 1.0}, None))
    board.apply(ImageUpdate(tmp_path / "epoch0001.png", "after epoch 1"))
    for window in board.windows.values():
        window.dirty = False
    board.mark_all_dirty()
    assert [window.win for window in board.dirty()] == ["config", "loss", "examples"]


def test_history_of_a_resumed_run_rebuilds_the_curves():
    records = [
        {"kind": "train", "epoch": 0, "step": 2, "epoch_progress": 0.5, "losses": {"G/gan": 1.0}, "lr": {"opt_g": 1.0}},
        {"kind": "train", "epoch": 0, "step": 4, "epoch_progress": 1.0, "losses": {"G/gan": 0.9}, "lr": {"opt_g": 1.0}},
        {"kind": "val", "epoch": 0, "step": 4, "metrics": {"psnr": 20.0}},
        {"kind": "epoch", "epoch": 0, "step": 4, "losses": {"G/gan": 0.95}},
    ]
    board = Board(VisdomOptions())
    board.load_history(records, batches_per_epoch=4)
    assert board.windows["loss_G"].series["G/gan"] == ([0.5, 1.0], [1.0, 0.9])
    assert board.windows["val_psnr"].series["psnr"] == ([1.0], [20.0])


def test_options_defaults_and_errors():
    options = VisdomOptions()
    assert (options.server, options.port, options.env, options.images_every_epochs) == ("127.0.0.1", 8097, None, 1)
    for bad in ({"port": 0}, {"env": "a/b"}, {"queue_size": 0}, {"timeout": 0}, {"colour": "red"}):
        with pytest.raises(ValidationError):
            VisdomOptions(**bad)


def test_plugin_module_imports_neither_torch_nor_visdom():
    code = ("import sys, nectargan_visdom.plugin; "
            "print(sorted(m for m in ('torch', 'visdom', 'nectargan_visdom._vendor.visdom') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


class RecordingClient:
    """Stands in for visdom's client in ``Window.draw``: keeps what would be sent."""

    env = "e"

    def __init__(self):
        self.sent = {}

    def line(self, Y, X, win, env, opts):
        self.sent[win] = {"Y": Y, "X": X, "opts": opts}


def test_short_curves_get_markers_so_a_single_point_shows():
    board = Board(VisdomOptions())
    board.apply(ValidationUpdate(1.0, {"psnr": 21.0}))
    for step in range(MARKERS_UP_TO + 1):
        board.apply(LogUpdate(step / 10, {"loss": 1.0}, None))
    client = RecordingClient()
    for window in board.dirty():
        window.draw(client)
    assert client.sent["val_psnr"]["opts"]["markers"] is True and client.sent["val_psnr"]["opts"]["markersize"] > 0
    assert client.sent["val_psnr"]["X"].tolist() == [[1.0]]
    assert "markers" not in client.sent["loss"]["opts"]  # 51 points: the line alone
    board = Board(VisdomOptions())
    for step in range(MARKERS_UP_TO):
        board.apply(LogUpdate(step / 10, {"loss": 1.0}, None))
    board.windows["loss"].draw(client)
    assert client.sent["loss"]["opts"]["markers"] is True


def test_the_learning_rate_axis_starts_at_zero_and_labels_small_values():
    board = Board(VisdomOptions(log_scale=True))
    board.apply(LogUpdate(0.5, {"G/gan": 0.7}, {"opt_g": 2e-4, "opt_d": 2e-4}))
    client = RecordingClient()
    for window in board.dirty():
        window.draw(client)
    lr = client.sent["lr"]["opts"]
    assert lr["layoutopts"] == {"plotly": {"yaxis": {"title": "learning rate", "rangemode": "tozero",
                                                     "exponentformat": "e", "showexponent": "all"}}}
    assert lr["legend"] == ["opt_g", "opt_d"] and "ytype" not in lr
    loss = client.sent["loss_G"]["opts"]
    assert loss["ytype"] == "log" and "layoutopts" not in loss  # log_scale is for the loss windows only


def test_missing_assets_are_read_from_the_page(tmp_path):
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "main.js").write_text("")
    (tmp_path / "index.html").write_text(
        '<script src={{ static_url("js/main.js") }}></script>\n'
        "<script src={{ static_url('js/plotly-plotly.min.js') }}></script>\n"
        '<link href={{ static_url("../user/style.css") }}>\n')
    assert missing_assets(tmp_path) == ["js/plotly-plotly.min.js"]


def test_every_option_is_documented_with_its_default():
    text = (ROOT / "docs" / "plugins" / "visdom.md").read_text()
    for name, field in VisdomOptions.model_fields.items():
        default = "null" if field.default is None else str(field.default).lower()
        assert f"| `{name}` | `{default}` |" in text, name

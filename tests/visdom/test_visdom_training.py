"""Training runs that plot to a real visdom server, read back through visdom's own client."""

from __future__ import annotations

import base64
import io
import re
import threading
import time

import pytest
from PIL import Image

from visdom_helpers import free_port, series, toy_config, wait_until
from nectargan_core import Run, hookimpl
from support import cli_runner

# visdom's client calls the deprecated Logger.warn when it runs without its websocket (its bug, not ours).
pytestmark = pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")


def visdom_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: visdom:")]


class SenderThreads:
    """Records which sender threads are alive at each epoch's end."""

    def __init__(self):
        self.seen = []

    @hookimpl
    def on_epoch_end(self):
        self.seen.append({t.ident for t in threading.enumerate() if t.name == "nectargan-visdom"})


def test_a_toy_run_draws_losses_lr_validation_and_config(tmp_path, visdom_server, capfd):
    threads = SenderThreads()
    config = toy_config(tmp_path, "toy_plots", {"port": visdom_server.port})
    config["loop"]["epochs"] = 3
    run = Run.create(config, plugins=[threads]).fit()
    assert len(threads.seen) == 3 and len(threads.seen[0]) == 1 and threads.seen.count(threads.seen[0]) == 3
    assert not any(t.name == "nectargan-visdom" for t in threading.enumerate())  # stopped with the run
    records = run.metrics("train")
    windows = visdom_server.windows("toy_plots_v0")  # default env: <run name>_v<version>

    assert set(windows) == {"config", "loss", "lr", "val_mse"}
    losses = series(windows["loss"])
    assert set(losses) == {"loss", "noise"}
    assert [x for x, _ in losses["loss"]] == [r["epoch_progress"] for r in records]
    assert [y for _, y in losses["loss"]] == pytest.approx([r["losses"]["loss"] for r in records])
    assert [y for _, y in series(windows["lr"])["optimizer"]] == pytest.approx([r["lr"]["optimizer"] for r in records])
    assert [x for x, _ in series(windows["val_mse"])["mse"]] == [1.0, 2.0, 3.0]
    assert windows["config"]["type"] == "text" and "trainer: toy" in windows["config"]["content"]
    out = capfd.readouterr()
    assert "visdom: env 'toy_plots_v0'" in out.out and "all plots delivered; no updates dropped" in out.out
    assert visdom_warnings(out.err) == []


def test_a_pix2pix_run_shows_the_newest_example_grid(tmp_path, visdom_server):
    from nectargan_translate.data_cli import data_group

    data = tmp_path / "data"
    made = cli_runner().invoke(data_group, ["synth", str(data), "--count", "8", "--size", "32", "--val", "0.25",
                                           "--test", "0"])
    assert made.exit_code == 0, made.output
    run = Run.create({
        "trainer": "pix2pix",
        "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
        "loop": {"epochs": 2, "log_every_steps": 2},
        "data": {"root": str(data), "load_size": 32, "crop_size": 32, "num_workers": 0, "batch_size": 2},
        "models": {"generator": {"name": "unet", "depth": 4, "ngf": 8},
                   "discriminator": {"name": "patchgan", "ndf": 8, "n_layers": 2}},
        "checkpoint": {"every_epochs": None, "save_last": False},
        "visualizers": {"visdom": {"port": visdom_server.port, "env": "pix2pix_plots"}},
    }).fit()
    windows = visdom_server.windows("pix2pix_plots")

    logged = run.metrics("train")[-1]["losses"]
    assert set(series(windows["loss_G"])) == {k for k in logged if k.startswith("G/") and "." not in k}
    assert "D/gan_d" in logged and set(series(windows["loss_D"])) == {"D/total"}  # D's one term, shown once
    assert set(series(windows["lr"])) == {"opt_g", "opt_d"}
    # What the page gets: an LR axis from 0 with e-notation ticks, markers on the short validation curves.
    assert {key: windows["lr"]["content"]["layout"]["yaxis"][key] for key in ("rangemode", "exponentformat")} == \
        {"rangemode": "tozero", "exponentformat": "e"}
    validation = [name for name in windows if name.startswith("val_")]
    assert validation and all({trace["mode"] for trace in windows[name]["content"]["data"]} == {"lines+markers"}
                              for name in validation)
    newest = sorted((run.dir / "examples").glob("*.png"))[-1]
    assert newest.name == "epoch0002.png"
    content = windows["examples"]["content"]
    shown = Image.open(io.BytesIO(base64.b64decode(content["src"].split(",", 1)[1])))
    assert shown.size == Image.open(newest).size
    assert content["caption"] == "after epoch 2: epoch0002.png"


class ServerChaos:
    """Stops the server after step 5, starts it again after step 8, then waits for the plots to come back."""

    def __init__(self, server, env):
        self.server, self.env = server, env
        self.points_after_restart = None

    def loss_points(self):
        try:
            return len(series(self.server.windows(self.env)["loss"])["loss"])
        except Exception:  # noqa: BLE001 - not there yet
            return 0

    @hookimpl
    def on_train_batch_end(self, trainer):
        if trainer.global_step == 5:
            self.server.stop()
        elif trainer.global_step == 8:
            self.server.start()
        elif trainer.global_step == 9:  # records of steps 1..8 exist; 6 and 7 were logged while it was away
            self.points_after_restart = wait_until(lambda: self.loss_points() >= 8 and self.loss_points(), 15,
                                                   "the sender to reconnect and redraw")


def test_a_server_that_goes_away_and_comes_back(tmp_path, own_server, capfd):
    own_server.start()
    chaos = ServerChaos(own_server, "chaos")
    config = toy_config(tmp_path, "chaos", {"port": own_server.port, "env": "chaos", "retry_max": 0.2},
                        samples=40, step_sleep=0.05)
    run = Run.create(config, plugins=[chaos]).fit()

    assert run.status()["status"] == "finished"
    assert chaos.points_after_restart >= 8  # the restarted server got the whole curve, during training
    windows = own_server.windows("chaos")
    assert len(series(windows["loss"])["loss"]) == len(run.metrics("train")) == 20
    assert "config" in windows
    out = capfd.readouterr()
    [warning] = visdom_warnings(out.err)
    assert f"cannot reach the server at http://127.0.0.1:{own_server.port} (" in warning  # refused, or reset
    assert "all plots delivered" in out.out


def test_a_silent_server_never_slows_training(tmp_path, blackhole_port, capfd):
    import nectargan_visdom.visualizer  # noqa: F401 - import the vendored visdom before timing

    def timed(config):
        start = time.perf_counter()
        run = Run.create(config).fit()
        return time.perf_counter() - start, run

    base = toy_config(tmp_path, "alone", samples=400)
    baseline, _ = timed(base)
    slow = toy_config(tmp_path, "silent", {"port": blackhole_port, "timeout": 1.0, "queue_size": 8,
                                           "flush_timeout": 0.5}, samples=400)
    with_visdom, run = timed(slow)

    assert len(run.metrics("train")) == 200
    assert with_visdom < 2 * baseline + 1.0, (with_visdom, baseline)
    out = capfd.readouterr()
    # The sender sat in requests that never finish while 200 updates came: most were dropped, none waited.
    assert re.search(r"visdom: env 'silent_v0' at \S+: .*; \d+ updates dropped \(queue full\)", out.out)
    assert len(visdom_warnings(out.err)) <= 1  # none when the whole run is shorter than one request timeout


def test_a_failing_run_stops_the_sender_and_reports(tmp_path, capfd):
    config = toy_config(tmp_path, "failing", {"port": free_port(), "flush_timeout": 0.5}, fail_at_step=3)
    with pytest.raises(RuntimeError, match="toy failure"):
        Run.create(config).fit()
    out = capfd.readouterr()
    assert len(visdom_warnings(out.err)) == 1
    assert "window(s) not delivered (server unreachable)" in out.out


def test_a_resumed_run_shows_its_whole_history(tmp_path, visdom_server):
    config = toy_config(tmp_path, "resumed", {"port": visdom_server.port}, samples=16)
    config["loop"]["epochs"] = 1
    config["checkpoint"] = {"every_epochs": 1}
    first = Run.create(config).fit()
    resumed = Run.resume(first.dir, overrides=["loop.epochs=2"]).fit()

    curve = series(visdom_server.windows("resumed_v0")["loss"])["loss"]
    assert [x for x, _ in curve] == [r["epoch_progress"] for r in resumed.metrics("train")] == \
        [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]

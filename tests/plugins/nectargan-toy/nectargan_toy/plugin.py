"""Entry point module: registration only, no torch import."""

from __future__ import annotations

import click

from nectargan_core import hookimpl

from .options import ExtraSection, LinearOptions, RecorderOptions, ToyTrainerOptions


@hookimpl
def register_trainers(register):
    register("toy", "nectargan_toy.trainer:ToyTrainer", options=ToyTrainerOptions,
             description="Linear regression on fixed random data")


@hookimpl
def register_models(register):
    register("toy_linear", "nectargan_toy.trainer:build_linear", options=LinearOptions, role="generator",
             description="One linear layer")


@hookimpl
def register_losses(register):
    register("toy_mse", "torch.nn:MSELoss", description="Mean squared error")


@hookimpl
def register_callbacks(register):
    register("recorder", "nectargan_toy.callbacks:Recorder", options=RecorderOptions,
             description="Records every run hook call to a file")
    register("counter", "nectargan_toy.callbacks:Counter", description="Counts steps; state lives in checkpoints")


@hookimpl
def register_config_sections(register):
    register("toy_extra", ExtraSection)


@click.command("toy-hello")
@click.option("--name", default="world")
def toy_hello(name: str) -> None:
    """Say hello (a command added by the toy plugin)."""
    click.echo(f"hello {name} from toy")


@hookimpl
def register_commands(cli):
    cli.add_command(toy_hello)


#: A preset of the toy trainer (config values, as a config file holds them).
QUICK = {"trainer": "toy", "loop": {"epochs": 3}, "toy": {"samples": 8, "lr": 0.1}}


@hookimpl
def register_presets(register):
    register("toy-quick", QUICK, description="Three short epochs of the toy trainer")

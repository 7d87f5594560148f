"""What defines a pix2pix run, in a few lines: printed at start, kept in ``summary.json``, shown first by the report.

The reference prints its options, each network's parameter count and the
number of training images. These rows say that and more: the networks with
their resolved options, parameter counts, channels, the generator's size
multiple and the discriminator's receptive field; the data with its size per
split and its preprocessing; precision, loss, optimizer, LR schedule and the
example images.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch

from nectargan_losses import Constant
from nectargan_translate import (PairedDataset, cache_summary, data_channels, find_pairs, run_schedule, split_dir,
                                 training_size)

#: Options shown in the ``data`` row's preprocessing part, not repeated elsewhere.
CHANNEL_OPTIONS = {"in_channels", "out_channels", "input_channels", "target_channels"}
#: How many example file names the ``examples`` row lists.
SHOWN_EXAMPLES = 8


def pix2pix_rows(trainer: Any, base: Mapping[str, str]) -> dict[str, str]:
    """The base rows (trainer, device, schedule, seed) with the pix2pix ones in reading order."""
    rows = {"trainer": base["trainer"], "device": base["device"], "precision": precision_row(trainer),
            "generator": generator_row(trainer), "discriminator": discriminator_row(trainer),
            "data": data_row(trainer), **cache_row(trainer), "loss": loss_row(trainer), "optimizer": optimizer_row(trainer),
            "lr schedule": lr_row(trainer), "schedule": base["schedule"]}
    examples = examples_row(trainer)
    if examples:
        rows["examples"] = examples
    rows.update({k: v for k, v in base.items() if k not in rows})
    return rows


def value_text(value: Any) -> str:
    """A config value as YAML writes it (null, true, 0.5)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return f"{value:g}" if isinstance(value, float) else str(value)


def options_text(options: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in options.items() if k not in CHANNEL_OPTIONS)


def parameters(module: torch.nn.Module) -> str:
    return f"{sum(p.numel() for p in module.parameters()):,} parameters"


def precision_row(trainer: Any) -> str:
    section = trainer.config.precision
    text = f"{trainer.precision.name} (precision.amp: {section.amp})"
    if section.channels_last:
        text += ", channels_last"
    if section.compile != "off":
        text += f", torch.compile {section.compile} ({section.compile_backend})"
    return text


def generator_row(trainer: Any) -> str:
    choice = trainer.config.models.generator
    in_channels, out_channels = data_channels(trainer.config)
    text = f"{choice.name}: {parameters(trainer.generator)}, {in_channels} -> {out_channels} channels"
    multiple = getattr(trainer.generator, "size_multiple", None)
    if isinstance(multiple, int):
        text += f", inputs multiples of {multiple}"
    return f"{text}; {options_text(choice.options)}"


def discriminator_row(trainer: Any) -> str:
    choice = trainer.config.models.discriminator
    network = trainer.discriminator
    in_channels, out_channels = data_channels(trainer.config)
    judged = (f"judges A and B ({in_channels} + {out_channels} channels)" if trainer.conditional
              else f"judges B alone ({out_channels} channels)")
    text = f"{choice.name}: {parameters(network)}, {judged}"
    field = getattr(network, "receptive_field", None)
    if isinstance(field, int):
        text += f", receptive field {field}x{field}"
    size = training_size(trainer.config)
    output_size = getattr(network, "output_size", None)
    if size is not None and callable(output_size):
        try:
            side = output_size(size)
            text += f", {side}x{side} logits at {size}x{size}"
        except ValueError:
            pass
    return f"{text}; {options_text(choice.options)}"


def split_size(trainer: Any, split: str, dataset: Optional[Any]) -> str:
    """Pairs in ``split``: the built dataset's length, else a listing of its folder (nothing is read)."""
    if dataset is not None:
        return str(len(dataset))
    data = trainer.config.data
    if data.name != "paired":  # another plugin's dataset: built for its length (its items are not read)
        try:
            return str(len(trainer.build("dataset", data, split=split, seed=trainer.config.run.seed)))
        except Exception:  # noqa: BLE001 - a split the dataset cannot give is a size of none, not an error here
            return "none"
    folder = (data.options.get(split) or {}).get("folder", split)
    try:
        pairs, _ = find_pairs(split_dir(data.options["root"], folder), data.options.get("layout", "auto"))
    except Exception:  # noqa: BLE001 - a missing split is a size of none, not an error here
        return "none"
    return str(len(pairs))


def data_row(trainer: Any) -> str:
    data = trainer.config.data
    options = data.options
    sizes = (f"{split_size(trainer, 'train', trainer.train_set)} train / "
             f"{split_size(trainer, 'val', trainer.val_set)} val / {split_size(trainer, 'test', None)} test pairs")
    if data.name != "paired":
        return f"{data.name}: {sizes}; {options_text(options)}"
    layout = getattr(trainer.train_set, "layout", options.get("layout"))
    load, crop = options.get("load_size"), options.get("crop_size")
    steps = ([f"resize {load}x{load}"] if load else []) + ([f"random crop {crop}x{crop}"] if crop else [])
    augment = ", ".join(item["name"] + (f"(p={item['p']:g})" if "p" in item else "")
                        for item in options.get("augment") or []) or "none"
    return (f"{options.get('root')} ({layout}, {options.get('direction')}): {sizes}; "
            f"train: {' -> '.join(steps) or 'original sizes'}, augment {augment}, batch {options.get('batch_size')}")


def cache_row(trainer: Any) -> dict[str, str]:
    """``data cache``: where the decoded training split lives and its size (paired data only)."""
    if not isinstance(trainer.train_set, PairedDataset):
        return {}
    return {"data cache": cache_summary(trainer.train_loader)}


def term_text(term: Any) -> str:
    if isinstance(term.schedule, Constant):
        return f"{term.schedule.constant:g} {term.name}"
    return f"{term.name} {term.schedule!r}"


def loss_row(trainer: Any) -> str:
    losses = trainer.losses
    resolved = losses.resolved
    sides = []
    for role, label in (("generator", "G"), ("discriminator", "D")):
        terms = [term_text(term) for term in losses.terms if term.role == role]
        if role == "discriminator" and losses.objective.needs_gradient_penalty:
            terms.append(f"{losses.objective.gp_weight:g} gp")
        sides.append(f"{label} = {' + '.join(terms) or '0'}")
    return f"spec {resolved.spec}, gan_mode {resolved.gan_mode}: {'; '.join(sides)}"


def optimizer_row(trainer: Any) -> str:
    optim = trainer.config.optim
    defaults = trainer.opt_g.defaults
    kernel = "fused" if defaults.get("fused") else "foreach" if defaults.get("foreach") else "single"
    text = f"Adam ({kernel}), lr G {optim.lr_g:g}, D {optim.lr_d:g}, betas ({optim.beta1:g}, {optim.beta2:g})"
    extras = {"weight_decay": optim.weight_decay or None, "gradient_accumulation":
              optim.gradient_accumulation if optim.gradient_accumulation > 1 else None,
              "grad_clip": optim.grad_clip, "d_every": optim.d_every if optim.d_every > 1 else None,
              "g_every": optim.g_every if optim.g_every > 1 else None}
    return text + "".join(f", {k} {v:g}" for k, v in extras.items() if v is not None)


def schedule_text(trainer: Any, choice: Any) -> str:
    """The configured schedule, and what it is for this run (null epochs split ``loop.epochs``)."""
    built = run_schedule(trainer, choice)
    return f"{choice.name} ({options_text(choice.options) or 'defaults'}): {built!r}"


def lr_row(trainer: Any) -> str:
    optim = trainer.config.optim
    text = schedule_text(trainer, optim.lr_schedule)
    if optim.lr_schedule_d is not None:
        text = f"G {text}; D {schedule_text(trainer, optim.lr_schedule_d)}"
    return f"{text}, stepped per {trainer.lr_units[0]}"


def examples_row(trainer: Any) -> str:
    every = trainer.config.examples.every_epochs
    if not every:
        return ""
    dataset, indices, split = trainer.example_source
    if not indices:
        return f"none ({split} has no images)"
    # the paired dataset's files by name; another plugin's dataset by item number (its attributes are its own)
    if isinstance(dataset, PairedDataset):
        names = [dataset.pairs[i].a.name for i in indices]
    else:
        names = [f"#{i}" for i in indices]
    shown = ", ".join(names[:SHOWN_EXAMPLES]) + (", ..." if len(names) > SHOWN_EXAMPLES else "")
    return f"{len(indices)} {split} images spread over {len(dataset)} (seed {trainer.config.run.seed}), " \
           f"every {every} epoch(s): {shown}"

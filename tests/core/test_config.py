"""Config files, overrides and the error messages users see."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nectargan_core.config import apply_overrides, load_config, load_file, parse_override_value, validate_config
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import get_plugins

GOOD = {
    "yaml": "trainer: toy\nrun:\n  name: exp\n  seed: 7\nloop:\n  epochs: 3\ntoy:\n  lr: 0.01\n  model:\n    name: toy_linear\n    features: 5\n",
    "toml": 'trainer = "toy"\n[run]\nname = "exp"\nseed = 7\n[loop]\nepochs = 3\n[toy]\nlr = 0.01\n[toy.model]\nname = "toy_linear"\nfeatures = 5\n',
    "json": json.dumps({"trainer": "toy", "run": {"name": "exp", "seed": 7}, "loop": {"epochs": 3},
                        "toy": {"lr": 0.01, "model": {"name": "toy_linear", "features": 5}}}),
}


@pytest.fixture
def registry():
    return get_plugins().registry


@pytest.mark.parametrize("fmt", sorted(GOOD))
def test_good_files_in_each_format(fmt, tmp_path, registry):
    path = tmp_path / f"run.{fmt}"
    path.write_text(GOOD[fmt])
    config = load_config(path, registry=registry)
    assert config.trainer == "toy"
    assert (config.run.name, config.run.seed, config.loop.epochs) == ("exp", 7, 3)
    assert config.toy.lr == 0.01
    assert config.toy.model.name == "toy_linear"
    assert config.toy.model.options == {"features": 5}
    # defaults are filled in everywhere, plugin sections included
    assert config.checkpoint.keep_last == 3
    assert config.toy_extra.greeting == "hello"
    assert config.visualizers == {"console": {"bar": "auto", "every_logs": 1}}


def test_overrides_are_typed_by_the_model(registry):
    config = load_config({"trainer": "toy"}, [
        "loop.epochs=4", "toy.lr=1e-3", "run.deterministic=true", "run.name=007",
        "loop.max_steps=null", "toy.model.features=2", "visualizers=[console]",
        "callbacks.recorder.path=/tmp/x.jsonl", 'toy_extra.greeting="{hi}"',
    ], registry)
    assert config.loop.epochs == 4 and isinstance(config.loop.epochs, int)
    assert config.toy.lr == pytest.approx(1e-3)
    assert config.run.deterministic is True
    assert config.run.name == "007"
    assert config.loop.max_steps is None
    assert config.toy.model.options == {"features": 2}
    assert config.callbacks == {"recorder": {"path": "/tmp/x.jsonl"}}
    assert config.toy_extra.greeting == "{hi}"



def test_a_bare_override_reaches_pydantic_as_plain_text_unless_a_number_was_wanted():
    """pydantic before 2.6 refuses a str subclass as a Literal choice ('Input should be 'batch', 'instance' or
    'none' (got 'instance')'): only a key that wants a number keeps the OverrideText marker its error needs."""
    from typing import Literal, Optional, Union

    from nectargan_core.config import OverrideText, read_override

    for annotation, text in ((Literal["batch", "instance", "none"], "instance"), (str, "007"),
                             (Optional[Literal["a", "b"]], "b"), (Union[int, Literal["auto"]], "auto")):
        assert type(read_override(annotation, OverrideText(text))) is str, (annotation, text)
    assert type(read_override(int, OverrideText("abc"))) is OverrideText  # "must be an integer (got ...)"
    assert read_override(Union[int, Literal["auto"]], OverrideText("5")) == 5

BAD = [
    ({"loop": {"epochs": -1}}, "defaults: loop.epochs: Input should be greater than 0 (got -1)"),
    ({"loop": {"epochs": "many"}}, "defaults: loop.epochs: must be an integer (got \"many\"); write a whole number without quotes or decimal point"),
    ({"loop": {"epochz": 3}}, "defaults: loop.epochz: unknown key; did you mean 'epochs'? allowed keys: batch_timeout_s, epochs, log_every_steps, max_steps, nonfinite, schedule_epochs, val_every_epochs, val_every_steps"),
    ({"lop": {}}, "defaults: lop: unknown key; did you mean 'loop'?"),
    ({"run": {"device": "gpu"}}, "defaults: run.device: must be auto, cpu, cuda, cuda:N (N from 0 to 127) or mps"),
    ({"run": {"name": "a/b"}}, "defaults: run.name: must be a plain name without path separators"),
    ({"checkpoint": {"best_mode": "up"}}, "defaults: checkpoint.best_mode: String should match pattern '^(auto|min|max)$' (got 'up')"),
    ({"trainer": "toyy"}, "defaults: trainer: unknown trainer 'toyy' (did you mean 'toy'?); available: "),
    ({"trainer": 3}, "defaults: trainer: must be a trainer name (got 3)"),
    ({"visualizers": ["consol"]}, "defaults: visualizers: unknown visualizer 'consol' (did you mean 'console'?)"),
    ({"visualizers": {"console": {"bar": "sometimes"}}}, "defaults: visualizers: visualizer 'console': bar: Input should be 'auto', 'on' or 'off' (got 'sometimes')"),
    ({"callbacks": {"recorder": {}}}, "defaults: callbacks: callback 'recorder': path: this key is required"),
    ({"callbacks": {"counter": {"x": 1}}}, "defaults: callbacks: callback 'counter' takes no options (got x)"),
    ({"trainer": "toy", "toy": {"model": {"name": "toy_linear", "features": 0}}},
     "defaults: toy.model: model 'toy_linear': features: Input should be greater than or equal to 1 (got 0)"),
    ({"trainer": "toy", "toy": {"model": {"name": "unet_9000"}}}, "defaults: toy.model: unknown model 'unet_9000'"),
    ({"toy": {"lr": 1}}, "defaults: toy: no trainer is chosen, and only a trainer's config has this section"),
    ([1, 2], "defaults: the top level must be a mapping of sections, got list"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m.split(":")[1].strip() for _, m in BAD])
def test_bad_values_name_the_key(data, message, registry):
    with pytest.raises(ConfigError) as info:
        validate_config(data, registry, source="defaults")
    text = str(info.value)
    assert message in text, text
    assert "Traceback" not in text


def test_every_error_is_reported_on_its_own_line(registry):
    with pytest.raises(ConfigError) as info:
        load_config({"loop": {"epochs": 0, "log_every_steps": 0}, "run": {"seed": -1}}, registry=registry)
    lines = str(info.value).splitlines()
    assert len(lines) == 3
    assert {line.split(":")[1].strip() for line in lines} == {"loop.epochs", "loop.log_every_steps", "run.seed"}


@pytest.mark.parametrize("overrides,expected", [
    (["loop.epochs=0"], ["--set loop.epochs=0: loop.epochs"]),
    # the last override of a key or of a section above it is the one that set the value
    (["loop.epochs=-1", 'loop={"epochs": 0}'], ['--set loop={"epochs": 0}: loop.epochs']),
    (['loop={"epochs": 0}', "loop.epochs=-2"], ["--set loop.epochs=-2: loop.epochs"]),
    (["loop.epochs=-1", "run.name=x", "loop.epochs=-3"], ["--set loop.epochs=-3: loop.epochs"]),
    (["run.seed=-1"], ["config.yaml: loop.epochs", "--set run.seed=-1: run.seed"]),
])
def test_each_error_line_names_where_its_value_came_from(overrides, expected, tmp_path, registry):
    """A value set by ``--set`` is named as that override; the others as the file (or the defaults)."""
    path = tmp_path / "config.yaml"
    path.write_text("loop:\n  epochs: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path if "config.yaml: loop.epochs" in expected else None, overrides, registry)
    lines = [line.removeprefix(f"{path.parent}/").rsplit(":", 1)[0] for line in str(info.value).splitlines()]
    assert sorted(lines) == sorted(expected)


@pytest.mark.parametrize("text,suffix,message", [
    ("run:\n  name: [unclosed\n", ".yaml", ":3: invalid YAML"),
    ('{"run": }', ".json", ":1: invalid JSON"),
    ("[run\nname='x'", ".toml", ": invalid TOML"),
    ("- a\n- b\n", ".yaml", "the top level must be a mapping of sections, got list"),
    ("run: {}", ".ini", "unsupported config format '.ini'"),
])
def test_unreadable_files(text, suffix, message, tmp_path):
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_file(tmp_path / "nope.yaml")


@pytest.mark.parametrize("override,message", [
    ("loop.epochs", "expected key.path=value"),
    ("=3", "expected key.path=value"),
    ("loop..epochs=3", "expected key.path=value"),
    ("run.name.x=3", "'run.name' is a value, not a section"),
])
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides({"run": {"name": "a"}}, [override])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_override_parser_never_crashes(raw):
    try:
        value = parse_override_value(raw)
    except ConfigError:
        return
    assert value is None or isinstance(value, (str, list, dict, int, float, bool))


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
                    max_leaves=10))
def test_loader_rejects_or_accepts_any_data_cleanly(data):
    """Arbitrary data under a known section gives a valid config or a ConfigError, nothing else."""
    try:
        validate_config({"loop": data}, get_plugins().registry)
    except ConfigError as exc:
        assert str(exc).startswith("config: loop")


def test_cli_validate_show_schema_init(cli, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(GOOD["yaml"])
    ok = cli("config", "validate", str(good))
    assert ok.returncode == 0 and ok.stdout.strip() == f"{good}: ok"

    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: toy\nloop:\n  epochs: 0\ntoy:\n  lrr: 1\n")
    result = cli("config", "validate", str(bad))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {bad}: loop.epochs: Input should be greater than 0 (got 0)",
        f"error: {bad}: toy.lrr: unknown key; did you mean 'lr'? allowed keys: batch_size, fail_at_step, "
        "fail_first_attempt_only, fail_rank, loss, lr, model, nan_at_step, samples, signal_at_exit, signal_at_step, "
        "signal_name, signal_rank, signal_to, sleep_at_step, sleep_rank, sleep_s, step_sleep, stop_at_step, "
        "stop_rank, stop_where, val_samples",
    ]

    shown = cli("config", "show", "-c", str(good), "--set", "loop.epochs=9", "--json")
    assert shown.returncode == 0
    data = json.loads(shown.stdout)
    assert data["loop"]["epochs"] == 9 and data["toy"]["model"] == {"name": "toy_linear", "features": 5}

    schema = json.loads(cli("config", "schema", "--trainer", "toy").stdout)
    assert {"run", "loop", "checkpoint", "toy", "toy_extra"} <= set(schema["properties"])

    starter = tmp_path / "starter.yaml"
    made = cli("config", "init", "--trainer", "toy", "-o", str(starter))
    assert made.returncode == 0
    text = starter.read_text()
    assert "trainer: toy" in text and "epochs: 10  # Number of epochs to train" in text
    assert cli("config", "validate", str(starter)).returncode == 0
    again = cli("config", "init", "-o", str(starter))
    assert again.returncode == 2 and "already exists; use --force" in again.stderr


@pytest.mark.parametrize("value, tag", [
    ("!!binary aGVsbG8=", "!!binary"), ("!!set {a, b}", "!!set"), ("!!omap [a: 1]", "!!omap"),
    ("!!timestamp 2001-12-14", "!!timestamp"), ("!!pairs [a: 1]", "!!pairs"), ("!local x", "!local"),
])
def test_a_yaml_tag_a_config_never_uses_is_refused_naming_it(tmp_path, value, tag):
    """!!binary became the text "b'hello'" for a text key, and !!set a name whose order changed from run to run."""
    path = tmp_path / "tagged.yaml"
    path.write_text(f"trainer: toy\nrun:\n  name: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert str(info.value) == (f"{path}:3: invalid YAML: the tag {tag} at run.name is not used in configs; write "
                               "plain text, numbers, true/false, lists and mappings")


def test_a_parts_option_given_with_set_is_blamed_on_that_set():
    from nectargan_core.config import origin_of

    origins = {"data.cache": "--set data.cache=OFF", "visualizers.console.bar": "--set visualizers.console.bar=x"}
    assert origin_of("data: dataset 'paired': cache: Input should be 'auto' (got 'OFF')", "p.yaml",
                     origins) == "--set data.cache=OFF"
    assert origin_of("visualizers: visualizer 'console': bar: Input should be 'on' (got 'x')", "p.yaml",
                     origins) == "--set visualizers.console.bar=x"
    assert origin_of("data: dataset 'paired': load_size: too small", "p.yaml", origins) == "p.yaml"
    assert origin_of("loop.epochs: must be > 0", "p.yaml", origins) == "p.yaml"


def test_why_the_config_does_not_use_pydantics_strict_mode_still_holds():
    """docs/architecture.md says strict mode refuses what YAML configs must say and cannot mark a Literal; when a
    pydantic release changes that, this fails and the decision is worth making again."""
    from pathlib import Path as _Path
    from typing import Literal as _Literal

    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    class StrictOptions(BaseModel):
        model_config = ConfigDict(strict=True)
        crop: tuple[int, int] = (1, 1)
        root: _Path = _Path(".")

    for data, message in (({"crop": [256, 256]}, "Input should be a valid tuple"),
                          ({"root": "datasets/facades"}, "Input should be an instance of Path")):
        with pytest.raises(ValidationError) as caught:
            StrictOptions.model_validate(data)
        assert caught.value.errors()[0]["msg"] == message
    with pytest.raises(Exception, match="strict"):
        class StrictLiteral(BaseModel):
            mode: _Literal[1, 3] = Field(1, strict=True)

        StrictLiteral.model_validate({"mode": 3})
    # ... while our sections read both as YAML writes them, and refuse the coercions strict mode is for
    from nectargan_core import Section

    class Ours(Section):
        crop: tuple[int, int] = (1, 1)
        root: _Path = _Path(".")
        epochs: int = 1

    assert Ours.model_validate({"crop": [256, 256], "root": "datasets/facades"}).crop == (256, 256)
    with pytest.raises(ValidationError, match=r'must be an integer \(got "3"\); write a whole number'):
        Ours.model_validate({"epochs": "3"})


def test_a_section_that_a_set_makes_or_replaces_is_blamed_on_that_set(tmp_path):
    from nectargan_core.config.loading import made_by

    assert made_by({}, "no.such.key") == ["no", "no.such"]
    assert made_by({"precision": {"amp": "off"}}, "precision.amp") == []
    assert made_by({"precision": {"amp": "off"}}, "precision.amp.x") == ["precision.amp"]
    assert made_by({"precision": 3}, "precision.amp") == ["precision"]
    path = tmp_path / "p.yaml"
    path.write_text("loop: {epochs: 2}\n")
    for override, start in [("no.such.key=1", "--set no.such.key=1: no: "),
                            ("loop.nosuch.x=1", "--set loop.nosuch.x=1: loop.nosuch: ")]:
        with pytest.raises(ConfigError) as raised:
            load_config(str(path), [override])
        assert str(raised.value).startswith(start), str(raised.value)
    with pytest.raises(ConfigError) as raised:  # the file's own mistake stays the file's
        load_config(str(path), ["loop.epochs=3", "no_section=1"])
    assert str(raised.value).startswith("--set no_section=1: no_section: ")
    with pytest.raises(ConfigError) as raised:  # a section an earlier --set made is that one's, not a later one's
        load_config({}, ["run.device=cuda:99999999999999999999", "run.output_dir=runs"])
    assert str(raised.value).startswith("--set run.device=cuda:99999999999999999999: run.device: ")


def test_a_config_read_from_a_run_is_named_by_its_file():
    with pytest.raises(ConfigError) as raised:
        load_config({"loop": {"epochs": -1}}, [], label="runs/x/version_0/config.yaml")
    assert str(raised.value).startswith("runs/x/version_0/config.yaml: loop.epochs: ")


def test_a_value_where_a_section_belongs_is_named_as_such():
    with pytest.raises(ConfigError) as raised:
        load_config({}, ["loop=on"])
    assert str(raised.value) == ("--set loop=on: loop: must be a section: a mapping of its keys to values "
                                 "(got 'on')")


def test_a_trainers_section_without_a_trainer_says_to_choose_one():
    registry = get_plugins().registry
    with pytest.raises(ConfigError) as raised:
        load_config({}, ["data.num_workers=0"], registry)
    message = str(raised.value)
    assert message.startswith("--set data.num_workers=0: data: no trainer is chosen, and only a trainer's config "
                              "has this section; set 'trainer' in the config or use --trainer NAME (installed: ")
    assert "pix2pix" in message and "\n" not in message
    with pytest.raises(ConfigError) as raised:  # a key no trainer has is just unknown
        load_config({}, ["nosuch=1"], registry)
    assert str(raised.value).startswith("--set nosuch=1: nosuch: unknown key; allowed keys: ")

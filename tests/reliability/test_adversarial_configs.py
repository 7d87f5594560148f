"""Adversarial configs: any config validates into bounded values or is refused with ``error:`` lines, fast.

The configs are generated (``config_adversary.py``): every key of every
installed part is attacked with booleans, null, huge and non-finite numbers,
numeric strings, control characters, long texts and nested structures; whole
files are alias bombs, deep nesting, duplicate keys at several depths and files
of absurd size. The guarantees (docs/config.md, "How config files are read" and
"Limits"; docs/reliability.md):

- the outcome is either a config whose values are within the documented bounds,
  or a ConfigError (exit 2 through the CLI) whose every line is ``error: FILE...``;
  never another exception, a traceback, a hang or a raw control character;
- a boolean in any numeric key, and NUL or an escape in any text, is refused
  naming the key;
- refused values never create a run directory.

The default run takes a seeded sample of the random series; ``-m slow`` runs the
long series (set NECTARGAN_ADVERSARY_EXAMPLES to run longer still).
"""

from __future__ import annotations

import json
import os
import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import config_adversary as adversary
from nectargan_core import limits
from nectargan_core.config import load_config, load_file
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import get_plugins
from support import ROOT, run_cli

#: Longest a config may take to validate or be refused, in process (generous: a shared 2-core machine).
IN_PROCESS_SECONDS = 5.0
#: Longest ``nectargan config validate`` may take, start-up included.
CLI_SECONDS = 30.0
UNSAFE_OUTPUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
LONG_SERIES = int(os.environ.get("NECTARGAN_ADVERSARY_EXAMPLES", "100"))
#: The random series draw the same examples in every run (CI must not fail by chance); set
#: NECTARGAN_LONG_SERIES=1 to draw new ones each time, as a search for new failures.
RANDOM_DRAWS = os.environ.get("NECTARGAN_LONG_SERIES") == "1"


@lru_cache(maxsize=1)
def registry() -> Any:
    return get_plugins().registry


@lru_cache(maxsize=1)
def bases() -> tuple[dict[str, Any], ...]:
    return tuple(adversary.resolved_bases(registry()))


@lru_cache(maxsize=1)
def unique_leaves() -> tuple[tuple[int, tuple[Any, ...], Any], ...]:
    """``(base index, path, value)`` for each distinct key path over all base configs."""
    seen: dict[str, tuple[int, tuple[Any, ...], Any]] = {}
    for index, base in enumerate(bases()):
        for path, value in adversary.leaves(base):
            seen.setdefault(adversary.dotted(path), (index, path, value))
    return tuple(seen.values())


def all_leaves() -> list[tuple[int, tuple[Any, ...], Any]]:
    return [(index, path, value) for index, base in enumerate(bases()) for path, value in adversary.leaves(base)]


def outcome(path: Path) -> tuple[str, Any]:
    """Validate ``path`` in process: ``("ok", resolved)`` or ``("refused", ConfigError)``; anything else fails."""
    started = time.monotonic()
    try:
        result: tuple[str, Any] = ("ok", load_config(path, registry=registry()).to_dict())
    except ConfigError as error:
        result = ("refused", error)
    seconds = time.monotonic() - started
    assert seconds < IN_PROCESS_SECONDS, f"{path.name} took {seconds:.1f} s"
    return result


def assert_clean(path: Path, result: tuple[str, Any]) -> None:
    """Bounded values, or error lines each naming the file, exit code 2, no raw control character."""
    kind, value = result
    if kind == "ok":
        problems = adversary.bound_violations(value)
        assert not problems, f"{path.name} validated outside the documented bounds: {problems[:3]}"
    else:
        assert value.exit_code == 2
        lines = str(value).splitlines()
        assert lines and all(line.startswith(str(path)) for line in lines), str(value)[:500]


def assert_cli_clean(path: Path) -> str:
    """``nectargan config validate PATH``: ok (exit 0, bounded) or only ``error:`` lines (exit 2); returns stderr."""
    started = time.monotonic()
    result = run_cli("config", "validate", str(path), timeout=CLI_SECONDS)
    seconds = time.monotonic() - started
    assert seconds < CLI_SECONDS
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not UNSAFE_OUTPUT.search(result.stdout + result.stderr), "raw control character in the output"
    if result.returncode == 0:
        assert result.stdout.strip() == f"{path}: ok"
        # one-line warnings are allowed (a mutated provenance block: "this config used nectargan-losses 0 ...")
        assert all(line.startswith("warning: ") for line in result.stderr.strip().splitlines()), result.stderr
        assert not adversary.bound_violations(load_config(path, registry=registry()).to_dict())
    else:
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert lines and all(line.startswith(f"error: {path}") for line in lines), result.stderr[-2000:]
    return result.stderr


# -- every key, one class of value at a time -----------------------------------------
def test_the_generated_keys_cover_every_installed_part():
    """The bases use every registered part, so a new option of any plugin is attacked automatically."""
    paths = {adversary.dotted(path) for _, path, _ in unique_leaves()}
    for kind, where in (("visualizer", "visualizers.{}"), ("callback", "callbacks.{}")):
        for name in registry().names(kind):
            assert any(p.startswith(where.format(name)) for p in paths), (kind, name)
    for name in adversary.AUGMENTATIONS:
        assert any(adversary.dotted(path).startswith("data.augment") and value == name
                   for _, path, value in unique_leaves()), name
    used_models = {value for _, path, value in all_leaves() if path[-1] == "name" and path[0] in ("models", "toy")}
    assert used_models >= set(registry().names("model"))
    assert len(paths) > 200


# JSON files here: the values are typed the same in every format, and JSON is parsed fastest.
@pytest.mark.parametrize("value", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["true", "false"])
def test_a_boolean_in_any_numeric_key_is_refused_naming_it(value, tmp_path):
    targets = [(index, path) for index, path, old in unique_leaves() if adversary.numeric(old)]
    assert len(targets) > 100
    accepted = []
    for index, path in targets:
        file = adversary.write_config(tmp_path / "bool.json", adversary.set_at(bases()[index], path, value))
        kind, result = outcome(file)
        if kind == "ok" or adversary.key_name(path) not in str(result) or "boolean" not in str(result):
            accepted.append(adversary.dotted(path))
        else:
            assert_clean(file, (kind, result))
    assert not accepted, f"a boolean passed as a number (or the error did not name the key): {accepted[:10]}"


@pytest.mark.parametrize("value", [2**63, pytest.param(-(2**63) - 1, marks=pytest.mark.slow),
                                   pytest.param(10**400, marks=pytest.mark.slow)], ids=["2**63", "-2**63-1", "10**400"])
def test_an_integer_beyond_64_bits_in_any_integer_key_is_refused_naming_it(value, tmp_path):
    targets = [(index, path) for index, path, old in unique_leaves() if isinstance(old, int) and adversary.numeric(old)]
    assert len(targets) > 50
    accepted = []
    for index, path in targets:
        file = adversary.write_config(tmp_path / "huge.json", adversary.set_at(bases()[index], path, value))
        kind, result = outcome(file)
        if kind == "ok" or adversary.key_name(path) not in str(result):
            accepted.append(adversary.dotted(path))
        else:
            assert_clean(file, (kind, result))
    assert not accepted, f"{value} was accepted (or the key not named) in: {accepted[:10]}"


@pytest.mark.parametrize("bad", ["\x00", "\x1b[2J", pytest.param("\n", marks=pytest.mark.slow),
                                 pytest.param("\u202e", marks=pytest.mark.slow)], ids=["nul", "escape", "newline", "bidi"])
def test_a_control_character_in_any_text_is_refused_naming_it(bad, tmp_path):
    targets = [(index, path, old) for index, path, old in unique_leaves() if isinstance(old, str)]
    assert len(targets) > 50
    accepted = []
    for index, path, old in targets:
        file = adversary.write_config(tmp_path / "text.json", adversary.set_at(bases()[index], path, old + bad))
        kind, result = outcome(file)
        if kind == "ok" or adversary.key_name(path) not in str(result):
            accepted.append(adversary.dotted(path))
        else:
            assert_clean(file, (kind, result))
    assert not accepted, f"{bad!r} was accepted (or the key not named) in: {accepted[:10]}"


def test_null_in_a_key_that_does_not_take_it_names_the_default(tmp_path):
    """null never silently means 'empty' or 'default': refused naming the default, or a documented null."""
    targets = [(index, path) for index, path, old in unique_leaves() if old is not None]
    for index, path in targets:
        file = adversary.write_config(tmp_path / "null.json", adversary.set_at(bases()[index], path, None))
        kind, result = outcome(file)
        assert_clean(file, (kind, result))
        if kind == "refused" and len(path) == 2 and path[0] in ("run", "loop", "checkpoint"):
            assert "must not be null; remove the key to use the default" in str(result), str(result)
    file = adversary.write_config(tmp_path / "vis.yaml", {"visualizers": None})
    kind, result = outcome(file)
    assert kind == "refused" and "or write [] for none" in str(result) and "console" in str(result)


# -- random series: any value anywhere -----------------------------------------------
MUTATIONS = st.lists(st.tuples(st.integers(min_value=0), adversary.VALUES), min_size=1, max_size=3)


def mutated(choices: list[tuple[int, Any]], leaves: Any) -> tuple[dict[str, Any], list[str]]:
    data: dict[str, Any] | None = None
    where = []
    for pick, value in choices:
        index, path, _ = leaves[pick % len(leaves)]
        if data is None:
            data = bases()[index]
        try:
            data = adversary.set_at(data, path, value)
        except (KeyError, IndexError, TypeError):  # an earlier mutation replaced a parent of this path
            continue
        where.append(adversary.dotted(path))
    assert data is not None
    return data, where


def check_random(tmp_path: Path, choices: list[tuple[int, Any]], suffix: str, leaves: Any) -> None:
    data, _ = mutated(choices, leaves)
    file = adversary.write_config(tmp_path / f"random{suffix}", data)
    assert_clean(file, outcome(file))


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(choices=MUTATIONS, suffix=st.sampled_from([".yaml", ".json"]))
def test_any_value_anywhere_validates_within_bounds_or_is_refused(tmp_path_factory, choices, suffix):
    check_random(tmp_path_factory.mktemp("cfg"), choices, suffix, unique_leaves())


@pytest.mark.slow
@settings(max_examples=LONG_SERIES * 10, derandomize=not RANDOM_DRAWS, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(choices=MUTATIONS, suffix=st.sampled_from([".yaml", ".json"]))
def test_any_value_anywhere_long_series(tmp_path_factory, choices, suffix):
    check_random(tmp_path_factory.mktemp("cfg"), choices, suffix, all_leaves())


def cli_random(tmp_path: Path, choices: list[tuple[int, Any]], suffix: str) -> None:
    data, _ = mutated(choices, unique_leaves())
    assert_cli_clean(adversary.write_config(tmp_path / f"cli{suffix}", data))


@settings(max_examples=4, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(choices=MUTATIONS, suffix=st.sampled_from([".yaml", ".json"]))
def test_any_value_through_the_cli_is_ok_or_error_lines(tmp_path_factory, choices, suffix):
    cli_random(tmp_path_factory.mktemp("cli"), choices, suffix)


@pytest.mark.slow
@settings(max_examples=LONG_SERIES // 3, derandomize=not RANDOM_DRAWS, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(choices=MUTATIONS, suffix=st.sampled_from([".yaml", ".json"]))
def test_any_value_through_the_cli_long_series(tmp_path_factory, choices, suffix):
    cli_random(tmp_path_factory.mktemp("cli"), choices, suffix)


# -- whole files ------------------------------------------------------------------------
@pytest.mark.parametrize("levels,fanout", [(9, 10), (40, 2), (4, 40)], ids=["billion-laughs", "deep-binary", "wide"])
def test_alias_bombs_are_refused_at_once(levels, fanout, tmp_path):
    file = tmp_path / "bomb.yaml"
    file.write_text(adversary.alias_bomb(levels, fanout))
    kind, error = outcome(file)
    assert kind == "refused" and "alias" in str(error), error
    assert_clean(file, (kind, error))


def test_an_alias_bomb_through_the_cli_ends_with_one_line(tmp_path):
    file = tmp_path / "bomb.yaml"
    file.write_text(adversary.alias_bomb(9, 10))
    stderr = assert_cli_clean(file)
    assert len(stderr.strip().splitlines()) == 1 and "alias bomb" in stderr


def test_aliases_that_stay_small_still_work(tmp_path):
    file = tmp_path / "shared.yaml"
    file.write_text("trainer: pix2pix\ndata:\n  val: &split {batch_size: 4, max_images: 2}\n  test:\n    <<: *split\n"
                    "    folder: held_out\nmodels:\n  generator: {name: unet, ngf: 8, depth: 3}\n")
    kind, resolved = outcome(file)
    assert kind == "ok", resolved
    assert resolved["data"]["test"] == {**resolved["data"]["val"], "folder": "held_out"}
    assert resolved["data"]["val"]["batch_size"] == 4


def test_a_recursive_alias_is_refused(tmp_path):
    file = tmp_path / "loop.yaml"
    file.write_text("run: &a {name: *a}\n")
    kind, error = outcome(file)
    assert kind == "refused" and "recursive" in str(error)


@pytest.mark.parametrize("fmt", ["yaml-flow", "yaml-block", "json", "toml"])
@pytest.mark.parametrize("depth", [33, 200, 5000, 100_000])
def test_deep_nesting_is_one_line_in_every_format(fmt, depth, tmp_path):
    if fmt == "yaml-block":
        depth = min(depth, 700)  # deeper block nesting is over 1 MiB of indentation: refused for its size
    suffix = {"yaml-flow": ".yaml", "yaml-block": ".yaml", "json": ".json", "toml": ".toml"}[fmt]
    file = tmp_path / f"deep{suffix}"
    file.write_text(adversary.deep_nesting(depth, fmt))
    kind, error = outcome(file)
    assert kind == "refused", f"{depth} levels of {fmt} validated"
    if fmt.startswith("yaml"):  # refused while reading, at the line where the 33rd level opens
        assert re.fullmatch(rf"{re.escape(str(file))}:\d+: invalid YAML: nested deeper than 32 levels", str(error)), error
    else:
        assert re.search(r"nested deeper", str(error)), error
    assert_clean(file, (kind, error))


def test_deep_nesting_through_the_cli(tmp_path):
    file = tmp_path / "deep.json"
    file.write_text(adversary.deep_nesting(100_000, "json"))
    stderr = assert_cli_clean(file)
    assert "nested deeper" in stderr and len(stderr.strip().splitlines()) == 1


def test_nesting_up_to_the_limit_is_fine(tmp_path):
    """32 levels are allowed (a config needs 7): the limit refuses absurd input, not structure."""
    file = tmp_path / "ok.yaml"
    file.write_text("x: " + "[" * 31 + "]" * 31 + "\n")
    kind, error = outcome(file)
    assert kind == "refused" and "unknown key" in str(error)  # reached validation: not a depth problem


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".toml"])
def test_a_config_of_absurd_size_is_refused_before_parsing(suffix, tmp_path):
    file = tmp_path / f"huge{suffix}"
    with file.open("w") as stream:
        stream.write("# " if suffix != ".json" else " ")
        stream.write("x" * (64 << 20))
        stream.write("\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"larger than 1 MiB") as info:
        load_file(file)
    assert time.monotonic() - started < 2.0
    assert str(info.value).count("\n") == 0


@pytest.mark.parametrize("text", ["x:\n" + "- 1\n" * 260_000, "x: [" + "1, " * 340_000 + "1]\n"], ids=["block", "flow"])
def test_a_huge_list_is_refused_while_reading(text, tmp_path):
    """Reading stops at the value limit: parsing the whole 1 MiB in pure Python would take many seconds."""
    file = tmp_path / "wide.yaml"
    file.write_text(text)
    started = time.monotonic()
    kind, error = outcome(file)
    assert kind == "refused" and "holds more than 10000 values" in str(error) and "alias" not in str(error), error
    assert time.monotonic() - started < 3.0


@pytest.mark.parametrize("augment,side", [({"name": "blur", "kernel_size": 33}, 16), ({"name": "elastic", "sigma": 5}, 16),
                                          ({"name": "blur", "kernel_size": 10**9}, None)])
def test_a_blur_wider_than_the_images_is_refused_before_training(augment, side, tmp_path):
    """torchvision pads by half the kernel with reflection: a wider kernel fails at the first batch, or allocates."""
    file = adversary.write_config(tmp_path / "blur.yaml", {"trainer": "pix2pix", "data": {
        "load_size": side, "crop_size": side, "augment": [augment]}})
    kind, error = outcome(file)
    assert kind == "refused" and ("too large" in str(error) or "at most 16383" in str(error)), error
    fits = adversary.write_config(tmp_path / "fits.yaml", {"trainer": "pix2pix", "data": {
        "load_size": 64, "crop_size": 64, "augment": [{"name": augment["name"]}]}})
    assert outcome(fits)[0] == "ok"


def test_a_device_file_as_config_is_refused_without_reading_forever(tmp_path):
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    stderr = assert_cli_clean(link)
    assert f"{link}: not a config file but a device;" in stderr


def test_a_fifo_as_config_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    stderr = assert_cli_clean(fifo)  # it waited forever for a writer
    assert f"{fifo}: not a config file but a FIFO;" in stderr


DUPLICATE_DEPTHS = [("loop",), ("loop", "epochs"), ("data", "val", "batch_size"), ("models", "generator", "name"),
                    ("visualizers", "console", "bar"), ("data", "augment")]


@pytest.mark.parametrize("path", DUPLICATE_DEPTHS, ids=[".".join(p) for p in DUPLICATE_DEPTHS])
def test_a_duplicate_key_is_refused_naming_it_and_both_lines(path, tmp_path):
    text, first, second = adversary.duplicate_key(bases()[0], path)
    file = tmp_path / "dup.yaml"
    file.write_text(text)
    kind, error = outcome(file)
    assert kind == "refused", f"duplicate {'.'.join(path)} accepted"
    message = str(error)
    assert f"duplicate key '{'.'.join(path)}'" in message and f"line {first}" in message \
        and f"line {second}" in message, message
    assert message.startswith(f"{file}:{second}:")


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(pick=st.integers(min_value=0))
def test_a_duplicate_key_anywhere_is_refused(tmp_path_factory, pick):
    """Any mapping key of the resolved config, at any depth, written twice."""
    candidates = [(index, path) for index, path, _ in unique_leaves()
                  if all(isinstance(part, str) for part in path)]
    index, path = candidates[pick % len(candidates)]
    text, first, second = adversary.duplicate_key(bases()[index], path)
    file = tmp_path_factory.mktemp("dup") / "dup.yaml"
    file.write_text(text)
    kind, error = outcome(file)
    assert kind == "refused" and "duplicate key" in str(error) and f"line {first}" in str(error), (path, error)


def test_a_duplicate_key_in_json_is_refused(tmp_path):
    file = tmp_path / "dup.json"
    file.write_text('{"loop": {"epochs": 3, "epochs": 4}}')
    kind, error = outcome(file)
    assert kind == "refused" and "duplicate key 'epochs'" in str(error)


def test_a_duplicate_key_through_the_cli(tmp_path):
    file = tmp_path / "dup.yaml"
    file.write_text("loop:\n  epochs: 3\nrun:\n  name: a\nloop:\n  epochs: 4\n")
    stderr = assert_cli_clean(file)
    assert stderr.strip() == (f"error: {file}:5: invalid YAML: duplicate key 'loop' (first at line 1, "
                              "again at line 5); keep one of them")


# -- the cases that broke (issue 13, classes 8 and 10), through the real CLI --------
ISSUE_CASES = [
    ("trainer: pix2pix\ndata: {num_workers: 1000000000}\n", "num_workers: must be at most"),
    ("trainer: pix2pix\ndata: {load_size: 1000000, crop_size: 1000000}\n", "load_size: must be at most 8192"),
    ("run: {seed: 1e30}\n", "run.seed: must be an integer (got 1e+30)"),
    ("run: {seed: 1.0e30}\n", "run.seed: must be an integer (got 1e+30)"),
    ("run: {seed: 99999999999}\n", "run.seed: must be at most 4294967295"),
    ("run: {threads: 1099511627776}\n", "run.threads: must be at most"),
    ('run: {name: "a\\0b"}\n', "U+0000"),
    ('run: {name: "\\e[2J\\e[31mok"}\n', "U+001B"),
    ("loop: {epochs: true}\n", "loop.epochs: a boolean where a number is expected"),
    ("trainer: pix2pix\ndata: {in_channels: true}\n", "in_channels: a boolean where a number is expected"),
    ("loop: {epochs: 3}\nloop: {epochs: 4}\n", "duplicate key 'loop'"),
    ("trainer: pix2pix\noptim: {lr_g: .nan}\n", "optim.lr_g: Input should be a finite number"),
    ("loop: {epochs: null}\n", "remove the key to use the default (10)"),
]


@pytest.mark.parametrize("text,message", ISSUE_CASES, ids=[m.split(":")[0] for _, m in ISSUE_CASES])
def test_the_issue_cases_are_one_line_each(text, message, tmp_path):
    file = tmp_path / "case.yaml"
    file.write_text(text)
    stderr = assert_cli_clean(file)
    assert len(stderr.strip().splitlines()) == 1 and message in stderr, stderr


STRICT_CASES = [
    ("run: {deterministic: off}\n", 'run.deterministic: must be true or false (got "off")'),
    ("run: {deterministic: yes}\n", 'run.deterministic: must be true or false (got "yes")'),
    ("run: {deterministic: 1}\n", "run.deterministic: must be true or false (got 1)"),
    ("checkpoint: {save_last: 'true'}\n", 'checkpoint.save_last: must be true or false (got "true")'),
    ("loop: {epochs: '2'}\n", 'loop.epochs: must be an integer (got "2")'),
    ("loop: {epochs: 2.0}\n", "loop.epochs: must be an integer (got 2.0)"),
    ("trainer: pix2pix\noptim: {lr_g: '1e-4'}\n", 'optim.lr_g: must be a number (got "1e-4")'),
    ("trainer: pix2pix\ndata: {num_workers: '2'}\n", 'num_workers: must be an integer (got "2")'),
]


@pytest.mark.parametrize("text,message", STRICT_CASES, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(STRICT_CASES)])
def test_no_boolean_or_integer_is_coerced_from_another_type(text, message, tmp_path):
    """pydantic's lax mode read off/yes/1 as booleans and '2'/2.0 as 2 (issue 13): refused naming the key."""
    file = tmp_path / "case.yaml"
    file.write_text(text)
    kind, result = outcome(file)
    assert kind == "refused" and message in str(result), result


def test_set_values_are_yaml_1_2_scalars_of_the_key_type():
    """``--set`` reads the same as a file: 5 is an integer, 007 stays a name, off is text (refused for a boolean)."""
    config = load_config(None, ["loop.epochs=5", "run.name=007", "run.deterministic=true", "run.seed=010",
                                "trainer=pix2pix", "optim.lr_g=1e-4", "data.num_workers=2"], registry())
    assert (config.loop.epochs, config.run.name, config.run.deterministic, config.run.seed) == (5, "007", True, 10)
    assert config.optim.lr_g == 1e-4 and config.data.num_workers == 2
    # a key that takes a few literal numbers (data.in_channels: 1, 3 or 4) reads --set 3 as the number 3,
    # as a file does (a stranger found every value refused: "Input should be 1, 3 or 4 (got '3')")
    for channels in (1, 3, 4):
        config = load_config(None, ["trainer=pix2pix", f"data.in_channels={channels}",
                                    f"models.generator.in_channels={channels}"], registry())
        assert config.data.options["in_channels"] == channels
    from nectargan_core.config import dump_yaml, parse_override_value
    from nectargan_core.strict_yaml import load_yaml

    kept = {"free": parse_override_value("007")}  # a bare value kept as given (free-form options) dumps as its text
    assert load_yaml(dump_yaml(kept)) == {"free": "007"}
    for override, message in [("run.deterministic=off", 'must be true or false (got "off")'),
                              ("run.deterministic=1", "must be true or false (got 1)"),
                              ("loop.epochs=2.0", "must be an integer (got 2.0)")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(None, [override], registry())


def test_yaml_1_1_surprises_read_as_written(tmp_path):
    """off is text, 010 is ten, 1e-4 is a number: what a reader of the file expects."""
    file = tmp_path / "yaml12.yaml"
    file.write_text("trainer: pix2pix\nrun: {seed: 010, name: 1:30}\noptim: {lr_g: 1e-4}\n"
                    "visualizers:\n  console: {bar: off}\n")
    kind, resolved = outcome(file)
    assert kind == "ok", resolved
    assert resolved["run"]["seed"] == 10 and resolved["run"]["name"] == "1:30"
    assert resolved["optim"]["lr_g"] == 1e-4 and resolved["visualizers"]["console"]["bar"] == "off"


# -- nothing is created for a refused config ----------------------------------------
# Each case starts a training process (torch is imported before the config is read): two in the default run.
@pytest.mark.parametrize("override", ["data.num_workers=1000000000", 'run.name="\x1b[2Jx"',
                                      *(pytest.param(o, marks=pytest.mark.slow) for o in (
                                          "data.load_size=1000000", "run.seed=1e30", "run.threads=1099511627776",
                                          "loop.epochs=true"))])
def test_train_refuses_before_any_run_directory_exists(override, tmp_path):
    runs = tmp_path / "runs"
    result = run_cli("train", "--trainer", "pix2pix", "--set", f"run.output_dir={runs}", "--set", override,
                     "--set", "run.device=cpu", cwd=tmp_path, timeout=CLI_SECONDS)
    assert result.returncode == 2, result.stderr[-1000:]
    assert "Traceback" not in result.stderr and not UNSAFE_OUTPUT.search(result.stderr)
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert not runs.exists()


# -- the command line's own numbers ---------------------------------------------------
CLI_OPTIONS = [
    (["data", "synth", "out", "--size", "100000"], "more than 2048"),
    (["data", "synth", "out", "--count", "10000000000"], "more than 100000"),
    (["data", "synth", "out", "--seed", "9" * 5000], "more than 4294967295"),
    (["data", "pair", "a", "b", "out", "--size", "9000"], "more than 8192"),
    (["predict", "ckpt", "x.png", "-o", "out", "--size", "100000x2"], "more than 8192"),
    (["predict", "ckpt", "x.png", "-o", "out", "--batch-size", "1000000000"], "more than 65536"),
    (["test", "run", "--batch-size", "1000000000"], "more than 65536"),
    (["train", "--nproc", "1000000"], "more than"),
    (["plot", "run", "--smooth", "1" + "0" * 30], "more than 10000"),
    (["report", "run", "--smooth", "100000"], "more than 10000"),
    (["models", "show", "unet_256", "--input-size", "100000"], "more than 8192"),
]


@pytest.mark.parametrize("args,message", CLI_OPTIONS, ids=[" ".join(a[:2]) + " " + a[-2] for a, _ in CLI_OPTIONS])
def test_command_line_numbers_are_bounded_with_the_reason(args, message, tmp_path):
    result = run_cli(*args, cwd=tmp_path, timeout=CLI_SECONDS)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1000:]
    error = result.stderr.splitlines()  # one line, nothing else (click's own block was four)
    assert len(error) == 1 and error[0].startswith("error: ") and message in error[0] \
        and ":" in error[0].split(message)[-1] and error[0].endswith(" --help)"), result.stderr
    assert not any(tmp_path.iterdir()), "nothing is written for a refused option"


def test_the_documented_limits_table_lists_every_bound_the_tests_check():
    text = (ROOT / "docs" / "config.md").read_text()
    limits = text[text.index("## Limits"):]
    limits = limits[:limits.index("\n## ", 1)]
    missing = [key for key, name in adversary.DOC_NAMES.items() if name not in limits]
    assert not missing and set(adversary.DOC_NAMES) == set(adversary.BOUNDS), missing
    for name in adversary.AUGMENT_BOUNDS:
        assert f"`{name}`" in limits or name.split(".")[1] in limits, name
    for number in ("1 MiB", "32 levels", "aliases expanded | 10000 |", "4096 characters", "4294967295", "8192", "65536", "16383", "2047"):
        assert number in limits, number


# -- every number option of every command: finite and bounded -------------------------
def _numeric_params() -> list[tuple[str, Any]]:
    """``(command path + option, param)`` for every number option or argument of every installed command."""
    import click

    from nectargan_core.cli.main import cli

    group = click.Group("nectargan", commands=dict(cli.commands))
    get_plugins().add_commands(group)
    found, stack = [], [("nectargan", group)]
    while stack:
        path, command = stack.pop()
        if isinstance(command, click.Group):
            stack.extend((f"{path} {name}", sub) for name, sub in command.commands.items())
            continue
        for param in command.params:
            if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType,
                                       limits.BoundedInt, limits.BoundedFloat)):
                found.append((f"{path} {param.opts[0]}", param))
    return sorted(found, key=lambda item: item[0])


def test_every_number_option_has_finite_bounds_on_both_sides():
    """click's own INT/FLOAT and open-ended ranges let nan, inf or 10**20 through: only bounded types may be used."""
    import click

    params = _numeric_params()
    assert any(name.endswith("--deadline") for name, _ in params) and len(params) >= 15, params
    unbounded = [f"{name}: {param.type!r}" for name, param in params
                 if not isinstance(param.type, (limits.BoundedInt, limits.BoundedFloat))
                 # an IntRange closed on both sides is fine (--png-compression 0..9, --port); floats never are
                 and not (type(param.type) is click.IntRange and None not in (param.type.min, param.type.max))]
    assert not unbounded, unbounded


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1" + "0" * 5000])
def test_no_float_option_takes_a_non_finite_or_huge_number(text):
    import click

    floats = [(name, param) for name, param in _numeric_params() if isinstance(param.type, limits.BoundedFloat)]
    assert {name.split()[-1] for name, _ in floats} >= {"--val", "--test", "--deadline", "--tolerance"}, floats
    for name, param in floats:
        with pytest.raises(click.BadParameter) as refused:
            param.type.convert(text, param, None)
        message = refused.value.format_message()
        assert param.opts[0] in message and ("finite" in message or "out of range" in message), (name, message)
        assert param.type.allowed() in message, (name, message)


NON_FINITE_CASES = [
    (["data", "synth", "out", "--val", "nan"], "'--val': nan is not a finite number; use a number >= 0 and < 1"),
    (["data", "split", "out", "--test", "nan"], "'--test': nan is not a finite number"),
    (["data", "download", "facades", "--deadline", "nan"], "'--deadline': nan is not a finite number"),
    (["data", "download", "facades", "--deadline", "1e400"], "'--deadline': 1e400 is not a finite number"),
    (["data", "download", "facades", "--deadline", "1e9"], "'--deadline': 1e9 is out of range; use a number > 0 "
                                                          "and <= 604800: a download that needs more than a week"),
]


@pytest.mark.parametrize("args,message", NON_FINITE_CASES, ids=[" ".join(a[:2]) + " " + a[-1] for a, _ in NON_FINITE_CASES])
def test_non_finite_numbers_on_the_command_line_are_one_line(args, message, tmp_path):
    """data synth --val nan was a traceback, data download --deadline nan switched the deadline off (issue 13)."""
    result = run_cli(*args, cwd=tmp_path, timeout=CLI_SECONDS)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1000:]
    error = result.stderr.splitlines()
    assert len(error) == 1 and error[0].startswith("error: ") and message in error[0], result.stderr
    assert not any(tmp_path.iterdir()), "nothing is written for a refused option"

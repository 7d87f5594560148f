"""The reference's flags typed out of habit point at what to write here (issue 24), through the core's option_hint
hook; unknown options that are not the reference's keep click's own message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nectargan_core import hookimpl
from nectargan_translate.reference_flags import TEST, TRAIN
from support import run_cli

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "coming-from-reference.md"


@pytest.mark.parametrize("args, line", [
    (["train", "--dataroot", "datasets/facades"],
     "error: No such option '--dataroot'; the reference's --dataroot is --set data.root=DIR here "
     "(docs/coming-from-reference.md maps every flag) (see: nectargan train --help)"),
    (["train", "--name=facades_pix2pix"],
     "error: No such option '--name'; the reference's --name is --set run.name=NAME here "
     "(docs/coming-from-reference.md maps every flag) (see: nectargan train --help)"),
    (["test", "runs/x", "--results_dir", "out"],
     "error: No such option '--results_dir'; the reference's --results_dir is --out DIR here "
     "(docs/coming-from-reference.md maps every flag) (see: nectargan test --help)"),
])
def test_a_reference_flag_says_what_to_write_here(args, line, tmp_path):
    done = run_cli(*args, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")


def test_other_unknown_options_keep_click_s_message(tmp_path):
    done = run_cli("train", "--frobnicate", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "error: No such option '--frobnicate' (see: nectargan train --help)\n")


def test_every_flag_with_a_hint_is_in_the_guide_s_tables():
    text = GUIDE.read_text()
    train = text.split("## `train.py` options")[1].split("\n## ")[0]
    test = text.split("## `test.py` options")[1].split("\n## ")[0]
    documented_train = set(re.findall(r"(--[a-zA-Z_0-9]+)", train))
    documented_test = set(re.findall(r"(--[a-zA-Z_0-9]+)", test)) | documented_train  # test.py shares train's
    assert set(TRAIN) - documented_train == set()
    assert set(TEST) - documented_test == set()


def test_a_plugin_whose_hint_fails_is_skipped_and_the_first_answer_wins(nectargan_plugin_host):
    class Broken:
        @hookimpl
        def option_hint(self, option):
            raise RuntimeError("boom")

    class Helpful:
        @hookimpl
        def option_hint(self, command, option):
            return "  use   --set x=1  " if option == "--x" else None

    host = nectargan_plugin_host(Broken(), Helpful(), installed=False)
    assert host.option_hint("nectargan train", "--x") == "use --set x=1"
    assert host.option_hint("nectargan train", "--y") is None

"""TranslationTrainer keeps its own names (``reserved``), as the engine keeps its: a subclass that defines one is
refused when its run is made, one that assigns one when the line runs; each in one line naming the base."""

from __future__ import annotations

import pytest

from nectargan_core import PluginError, Run, hookimpl
from nectargan_pix2pix.options import Pix2pixOptions
from nectargan_pix2pix.trainer import Pix2pixTrainer
from nectargan_translate import TranslationTrainer
from translation_fixtures import pix2pix_config as config


@pytest.fixture(scope="module")
def synth(make_synth):
    return make_synth(8, 32)


class TranslatorAttribute(Pix2pixTrainer):
    translator = "generator"  # the base's method, shadowed by a class attribute


class PrecisionInSetup(Pix2pixTrainer):
    def setup(self):
        super().setup()
        self.precision = "fp32"  # the base's precision policy, replaced


class OwnNames(Pix2pixTrainer):
    def setup(self):
        super().setup()
        self.precision_note = "fp32"  # a name of its own: fine


class Plugin:
    @hookimpl
    def register_trainers(self, register):
        for name, cls in [("translator_attribute", TranslatorAttribute), ("precision_in_setup", PrecisionInSetup),
                          ("own_names", OwnNames)]:
            register(name, cls, options=Pix2pixOptions)


def test_a_subclass_cannot_define_or_assign_a_name_the_base_owns(tmp_path, synth, nectargan_plugin_host):
    host = nectargan_plugin_host(Plugin())
    with pytest.raises(PluginError) as defined:
        Run.create({**config(tmp_path, synth), "trainer": "translator_attribute"}, host=host)
    assert str(defined.value) == (
        "trainer 'translator_attribute' (plugin 'Plugin'): TranslatorAttribute defines 'translator', which its base "
        "class TranslationTrainer owns (its own set-up and state); rename it (see TranslationTrainer.reserved)")
    assert not (tmp_path / "runs").exists()  # refused before the run directory

    run = Run.create({**config(tmp_path, synth), "trainer": "precision_in_setup"}, host=host)
    with pytest.raises(PluginError) as assigned:
        run.fit()
    assert str(assigned.value) == (
        "trainer 'precision_in_setup': PrecisionInSetup.setup assigns self.precision, which its base class "
        "TranslationTrainer owns (its own set-up and state); name your attribute otherwise (see "
        "TranslationTrainer.reserved)")

    fine = Run.create({**config(tmp_path, synth), "trainer": "own_names"}, host=host).fit()
    assert fine.trainer.precision_note == "fp32" and fine.trainer.precision.name in ("fp32", "bf16")


def test_the_reserved_names_are_what_the_base_sets_up_and_offers():
    """Every name the base assigns in its set-up or defines as a helper is reserved; the overridable ones are not."""
    reserved = TranslationTrainer.reserved
    assert {"train_set", "val_set", "opt_g", "opt_d", "update_g", "update_d", "precision", "translator",
            "setup_updates", "to_device"} <= reserved
    assert not reserved & {"train_dataloader", "validate", "write_examples", "example_batch", "example_indices",
                           "on_epoch_end", "on_load_checkpoint", "generators", "paired"}
    helpers = {name for name, value in vars(TranslationTrainer).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    overridable = {"train_dataloader", "validate", "write_examples", "example_batch", "example_indices",
                   "on_epoch_end", "on_load_checkpoint", "check_config", "describe", "generator_spec"}
    assert helpers - overridable <= reserved


def test_a_mixin_or_an_extended_reserved_set_keeps_the_base_s_names(tmp_path, synth, nectargan_plugin_host):
    """A mixin in front of the base may not define a reserved name either; a subclass that adds names of its own
    to ``reserved`` leaves the base's names the base's (its set-up still assigns them)."""
    from nectargan_core.trainer import check_trainer_class

    class SkipContractMixin:
        def dataset(self, split):  # would drop the base's check of another plugin's dataset
            return None

    class Mixed(SkipContractMixin, Pix2pixTrainer):
        pass

    with pytest.raises(PluginError, match=r"^Mixed: .*SkipContractMixin defines 'dataset', which its base class "
                                          r"TranslationTrainer owns"):
        check_trainer_class(Mixed, "Mixed")

    class Extended(Pix2pixTrainer):
        reserved = TranslationTrainer.reserved | {"mine"}

    class Plugin2:
        @hookimpl
        def register_trainers(self, register):
            register("extended", Extended, options=Pix2pixOptions)

    run = Run.create({**config(tmp_path, synth), "trainer": "extended"}, host=nectargan_plugin_host(Plugin2())).fit()
    assert run.trainer.global_step > 0

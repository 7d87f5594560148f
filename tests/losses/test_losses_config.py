"""Editing loss specs from config: weights, schedules, added and dropped terms, and the errors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from nectargan_core import hookimpl
from nectargan_core.config import apply_overrides, describe_errors, validate_config
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import PluginHost

import nectargan_losses.plugin
from nectargan_losses.config import LossSection
from nectargan_losses.specs import BASIC, GAN
from losses_fixtures import registry_fixture  # noqa: F401 - pytest fixtures


def resolve(registry, **data):
    return LossSection.model_validate(data, context={"registry": registry}).resolve(registry)


def weights(resolved):
    return {name: (term.role, term.weight) for name, term in resolved.terms.items()}


def test_default_is_the_pix2pix_reference(registry):
    resolved = LossSection().resolve(registry)
    assert resolved.spec == "basic" and resolved.gan_mode == "vanilla"
    assert weights(resolved) == {"gan": ("generator", 1.0), "l1": ("generator", 100.0),
                                 "gan_d": ("discriminator", 0.5)}
    assert resolved.terms["gan"].loss == resolved.terms["gan_d"].loss == GAN
    assert resolved.gan_options == {"gp_weight": 0.0, "real_label": 1.0, "fake_label": 0.0}


def test_builtin_specs_terms_and_weights(registry):
    extended = weights(resolve(registry, spec="extended"))
    assert extended == {"gan": ("generator", 1.0), "l1": ("generator", 100.0), "gan_d": ("discriminator", 0.5),
                        "l2": ("generator", 10.0), "sobel": ("generator", 3.0), "laplacian": ("generator", 1.0)}
    vgg = resolve(registry, spec="extended+vgg", terms={"vgg": {"options": {"weights": "vgg19.pth"}}})
    assert weights(vgg)["vgg"] == ("generator", 10.0) and set(vgg.terms) == set(extended) | {"vgg"}
    assert vgg.terms["vgg"].options["layers"] == ["relu1_2", "relu2_2", "relu3_3"]
    assert set(weights(resolve(registry, spec="basic+vgg", terms={"vgg": {"options": {"weights": "w"}}}))) == {
        "gan", "l1", "gan_d", "vgg"}


def test_change_a_weight_set_a_schedule_and_merge_options(registry):
    resolved = resolve(registry, spec="extended", terms={
        "l1": {"weight": 50},
        "l2": {"schedule": {"name": "linear", "start_value": 10, "end_value": 0, "end": 20}},
        "sobel": {"options": {"mode": "gradients"}},
        "gan_d": {"weight": 1},
    })
    assert resolved.terms["l1"].weight == 50.0
    assert resolved.terms["l2"].weight_spec() == {"name": "linear", "unit": "epoch", "start_value": 10.0,
                                                  "end_value": 0.0, "start": 0.0, "end": 20.0}
    assert resolved.terms["sobel"].options == {"mode": "gradients", "eps": 1e-6}
    assert resolved.terms["gan_d"].weight == 1.0
    # A plain weight later replaces a schedule.
    assert resolve(registry, terms={"l1": {"weight": 0}}).terms["l1"].weight_spec() == {"name": "constant", "value": 0.0}


def test_add_any_registered_loss_by_name_and_drop_terms(registry):
    resolved = resolve(registry, spec="extended", drop=["laplacian", "l2"], add={
        "ssim": {"weight": 2},
        "ssim_small": {"loss": "ssim", "options": {"kernel_size": 7, "gaussian": False}},
        "l2": {"loss": "charbonnier"},  # a dropped name can be reused
    })
    assert list(resolved.terms) == ["gan", "l1", "gan_d", "sobel", "ssim", "ssim_small", "l2"]
    assert resolved.terms["ssim"].loss == "ssim" and resolved.terms["ssim"].weight == 2.0
    assert resolved.terms["ssim"].options == {"kernel_size": 11, "sigma": 1.5, "gaussian": True}
    assert resolved.terms["ssim_small"].options["kernel_size"] == 7
    assert resolved.terms["l2"].loss == "charbonnier" and resolved.terms["l2"].role == "generator"


def test_edits_never_touch_the_registered_spec(registry):
    before = BASIC.model_dump()
    resolve(registry, terms={"l1": {"weight": 1}}, add={"ssim": {}}, drop=["gan"])
    assert BASIC.model_dump() == before


@pytest.mark.parametrize("data,message", [
    ({"spec": "basik"}, "spec: unknown loss_spec 'basik' (did you mean 'basic'?); available: basic, basic+vgg, extended, extended+vgg"),
    ({"gan_mode": "wgan"}, "gan_mode: unknown GAN objective 'wgan' (did you mean 'wgan-gp'?); available: hinge, lsgan, vanilla, wgan-gp"),
    ({"gan_options": {"gp_wieght": 1}}, "gan_options.gp_wieght: unknown key; did you mean 'gp_weight'?"),
    ({"terms": {"l1x": {"weight": 1}}}, "terms: loss spec 'basic' has no term 'l1x' (did you mean 'l1'?); its terms: gan, l1, gan_d"),
    ({"drop": ["l2"]}, "drop: loss spec 'basic' has no term 'l2'; its terms: gan, l1, gan_d"),
    ({"drop": ["l1"], "terms": {"l1": {"weight": 2}}}, "terms.l1: the term is dropped"),
    ({"add": {"ssmi": {}}}, "add.ssmi.loss: unknown loss 'ssmi' (did you mean 'ssim'?); available: charbonnier, counting, l1, l2, laplacian, smooth_l1, sobel, ssim, vgg"),
    ({"add": {"x": {"loss": "hinge"}}}, "'hinge' is a GAN objective: choose it with gan_mode"),
    ({"add": {"l1": {}}}, "add.l1: the spec already has this term"),
    ({"add": {"s": {"loss": "sobel", "options": {"mode": "both"}}}}, "add.s.options.mode: Input should be 'magnitude' or 'gradients'"),
    ({"terms": {"gan": {"options": {"x": 1}}}}, "terms.gan.options: the 'gan' term takes no options"),
    ({"spec": "basic+vgg"}, "terms.vgg.options.weights: loss 'vgg' needs VGG19 weights from a local file"),
])
def test_mistakes_name_the_key_and_the_allowed_values(registry, data, message):
    with pytest.raises(ValidationError) as info:
        LossSection.model_validate(data, context={"registry": registry})
    assert message in "\n".join(describe_errors(info.value, LossSection))
    unchecked = LossSection.model_validate(data)  # validated without a registry: names are not checked yet
    with pytest.raises(ConfigError) as info:
        unchecked.resolve(registry)
    assert str(info.value).startswith("loss: ") and message in str(info.value)


def test_weight_and_schedule_together_is_an_error(registry):
    with pytest.raises(ValidationError, match="give weight or schedule, not both"):
        LossSection.model_validate({"terms": {"l1": {"weight": 1, "schedule": {"name": "constant"}}}},
                                   context={"registry": registry})
    with pytest.raises(ValidationError, match="terms.l1.weight"):
        LossSection.model_validate({"terms": {"l1": {"weight": -1}}})


def test_a_plugin_spec_given_as_a_mapping_is_accepted():
    class Parts:
        @hookimpl
        def register_loss_specs(self, register):
            register("pure_l1", {"description": "L1 only", "terms": {"l1": {"loss": "l1", "weight": 3}}})

    host = PluginHost(env={})
    host.add_plugin(nectargan_losses.plugin, "losses")
    host.add_plugin(Parts(), "parts")
    resolved = resolve(host.registry, spec="pure_l1")
    assert weights(resolved) == {"l1": ("generator", 3.0)}


class _TrainerOptions(BaseModel):
    loss: LossSection = Field(default_factory=LossSection)


class _TrainerPlugin:
    @hookimpl
    def register_trainers(self, register):
        register("gan", "nectargan_core.trainer:Trainer", options=_TrainerOptions)


@pytest.fixture
def trainer_registry():
    host = PluginHost(env={})
    host.add_plugin(nectargan_losses.plugin, "losses")
    host.add_plugin(_TrainerPlugin(), "trainer")
    return host.registry


def test_embedded_in_a_trainer_config_with_command_line_overrides(trainer_registry):
    data = apply_overrides({"trainer": "gan", "visualizers": [], "loss": {"spec": "extended"}}, [
        "loss.terms.l1.weight=50", "loss.drop=[laplacian]", "loss.add.ssim.weight=2",
        "loss.gan_mode=lsgan", "loss.terms.l2.schedule={name: cosine, start_value: 10, end_value: 0, end: 50}",
    ])
    config = validate_config(data, trainer_registry)
    resolved = config.loss.resolve(trainer_registry)
    assert resolved.gan_mode == "lsgan"
    assert weights(resolved) == {"gan": ("generator", 1.0), "l1": ("generator", 50.0),
                                 "gan_d": ("discriminator", 0.5), "l2": ("generator", 10.0),
                                 "sobel": ("generator", 3.0), "ssim": ("generator", 2.0)}
    assert resolved.terms["l2"].schedule.name == "cosine"
    assert config.to_dict()["loss"]["add"] == {"ssim": {"loss": None, "weight": 2.0, "schedule": None, "options": {}}}


def test_errors_in_a_trainer_config_carry_the_section_path(trainer_registry):
    with pytest.raises(ConfigError) as info:
        validate_config({"trainer": "gan", "visualizers": [], "loss": {"terms": {"l1": {"wieght": 5}}, "add": {"x": {"loss": "nope"}}}},
                        trainer_registry)
    assert "config: loss.terms.l1.wieght: unknown key" in str(info.value)
    with pytest.raises(ConfigError) as info:
        validate_config({"trainer": "gan", "visualizers": [], "loss": {"add": {"x": {"loss": "nope"}}}}, trainer_registry)
    assert str(info.value).startswith("config: loss: add.x.loss: unknown loss 'nope'; available: ")
    with pytest.raises(ConfigError) as info:
        validate_config({"trainer": "gan", "visualizers": [], "loss": {"terms": {"l1": {"schedule": {"name": "linear", "end": -1}}}}},
                        trainer_registry)
    assert "config: loss.terms.l1.schedule: schedule 'linear': end: must be greater than start (0)" in str(info.value)

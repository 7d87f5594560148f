"""docs/plugins/contracts.md: what the built-in plugins read from other plugins' parts.

For each contract, a part that honours it works, and one that breaks it gets
one line naming the part, its plugin and the fix, never a silent default.
Runs use the fixtures plugin authors use (nectargan_core.testing) and the
``pix2pix-tiny`` preset, so each takes a second or two.
"""

from __future__ import annotations

import json

import pytest
import torch

import contract_parts
from nectargan_core.errors import CheckpointError, ConfigError, NectarGANError, PluginError
from nectargan_core.run import Run
from support import ROOT, run_cli

CONTRACTS = ROOT / "docs" / "plugins" / "contracts.md"


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and isinstance(exc.value, NectarGANError)
    return message


@pytest.fixture
def host(nectargan_plugin_host):
    return nectargan_plugin_host(contract_parts.plugin)


@pytest.fixture
def pix2pix(tiny_config, tiny_paired_dataset):
    """A tiny pix2pix config on the paired fixture data; keywords merge as in tiny_config."""
    def make(data=None, **sections):
        return tiny_config("pix2pix", data={"root": str(tiny_paired_dataset), **(data or {})}, **sections)

    return make


def train_steps(result) -> int:
    return len([r for r in result.metrics if r["kind"] == "train"])


# -- datasets --------------------------------------------------------------------------
def test_a_dataset_is_batched_by_its_declared_batch_size(host, tiny_config, run_training):
    config = tiny_config("pix2pix", data={"name": "cx_pairs", "count": 7, "batch_size": 3})
    assert train_steps(run_training(config, host=host)) == 3  # ceil(7 / 3); batch 1 would be 7 steps


def test_a_dataset_without_a_batch_size_option_is_refused_at_config_time(host, tiny_config):
    with pytest.raises(ConfigError) as exc:
        Run.create(tiny_config("pix2pix", data={"name": "cx_nobatch"}), host=host)
    message = one_line(exc)
    assert "data: dataset 'cx_nobatch' (plugin 'contract_plugin') declares no batch_size option" in message
    assert "batch_size: int = Field(1, ge=1)" in message


def test_the_batch_size_refusal_through_the_cli_is_one_line_with_exit_2(fake_dist, tmp_path):
    site = fake_dist("nectargan-nobatch", "nobatch_plugin", """
        from pydantic import BaseModel
        from nectargan_core import hookimpl

        class Options(BaseModel):
            count: int = 4

        @hookimpl
        def register_datasets(register):
            register("nobatch", "torch.utils.data:TensorDataset", options=Options)
    """)
    (tmp_path / "run.yaml").write_text("trainer: pix2pix\ndata: {name: nobatch}\n")
    result = run_cli("config", "validate", str(tmp_path / "run.yaml"), env={"PYTHONPATH": str(site)})
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "dataset 'nobatch'" in lines[0] and "declares no batch_size option" in lines[0]


def test_a_dataset_whose_items_are_not_a_and_b_tensors_is_refused_at_setup(host, tiny_config):
    run = Run.create(tiny_config("pix2pix", data={"name": "cx_tuples"}), host=host)
    with pytest.raises(PluginError) as exc:
        run.fit()
    assert one_line(exc) == ("dataset 'cx_tuples' (plugin 'contract_plugin'), train split: item 0 must be a mapping "
                             "with tensors 'A' (input) and 'B' (target); got tuple")


@pytest.mark.parametrize("dataset, problem", [
    ("cx_bytes", "item 0's 'A' is a uint8 tensor; images are floating point in [-1, 1] (for 8-bit pixels: "
                 "x.float() / 127.5 - 1)"),
    ("cx_pixel_values", "item 0's 'A' holds values from "),
    ("cx_grey_input", "item 0's 'A' has 1 channels, and data.in_channels is 3; make them agree (the networks are "
                      "built for data.in_channels)"),
])
def test_item_0_must_be_images_in_the_range_and_channels_the_config_says(host, tiny_config, dataset, problem):
    run = Run.create(tiny_config("pix2pix", data={"name": dataset}), host=host)
    with pytest.raises(PluginError) as exc:
        run.fit()
    message = one_line(exc)
    assert message.startswith(f"dataset '{dataset}' (plugin 'contract_plugin'), train split: {problem}"), message


# -- discriminators --------------------------------------------------------------------
@pytest.mark.parametrize("conditional, arity", [(True, 2), (False, 1)])
def test_a_discriminator_is_called_as_its_conditional_attribute_says(host, pix2pix, run_training, conditional, arity,
                                                                     monkeypatch):
    built = []
    monkeypatch.setattr(contract_parts.Judge, "__init__", _recording(contract_parts.Judge.__init__, built))
    config = pix2pix(models={"discriminator": {"name": "cx_judge", "conditional": conditional}},
                     loss={"gan_mode": "wgan-gp"})  # the gradient penalty calls D as training does
    result = run_training(config, host=host)
    assert train_steps(result) == 2 and built[-1].arities == {arity}  # built[0]: the config check's, on meta


def _recording(init, built):
    def wrapped(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(self)

    return wrapped


def test_a_discriminator_that_does_not_say_how_it_is_called_is_refused(host, pix2pix):
    run = Run.create(pix2pix(models={"discriminator": {"name": "cx_unsaid"}}), host=host)
    with pytest.raises(PluginError) as exc:
        run.fit()
    assert one_line(exc).startswith("model 'cx_unsaid' (plugin 'contract_plugin'): pix2pix calls its discriminator "
                                    "D(A, B) or D(B) as its bool attribute 'conditional' says, and it has none")


# -- generators: channels ----------------------------------------------------------------
def test_a_model_without_channel_options_builds_for_three_channels(host, pix2pix, run_training):
    result = run_training(pix2pix(models={"generator": {"name": "cx_fixed3"}}), host=host)
    assert train_steps(result) == 2


def test_a_model_without_channel_options_is_refused_for_other_channel_counts(host, pix2pix):
    with pytest.raises(ConfigError) as exc:  # refused before a run directory is made
        Run.create(pix2pix(data={"out_channels": 1}, models={"generator": {"name": "cx_fixed3"}}), host=host)
    assert one_line(exc).startswith("data.out_channels is 1, but model 'cx_fixed3' (plugin 'contract_plugin') has "
                                    "no 'out_channels' option")


# -- generators: size_multiple -------------------------------------------------------------
def test_size_multiple_is_the_declared_one_else_measured():
    from nectargan_translate.inference import size_multiple

    strided = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 4, 2, 1), torch.nn.Conv2d(3, 3, 4, 2, 1))
    assert size_multiple(strided, {}, 3) == 4
    strided.size_multiple = 16
    assert size_multiple(strided, {}, 3) == 16


@pytest.mark.parametrize("declared", [0, "8", 8.0, True])
def test_a_size_multiple_that_is_not_a_positive_int_is_refused(declared):
    from nectargan_translate.inference import size_multiple

    model = torch.nn.Identity()
    model.size_multiple = declared
    with pytest.raises(CheckpointError) as exc:
        size_multiple(model, {}, 3)
    assert one_line(exc).startswith(f"the generator (Identity) declares size_multiple {declared!r}; it must be a "
                                    "whole number of at least 1")


# -- schedules and losses ----------------------------------------------------------------------
def test_a_schedule_is_a_schedule_with_a_known_unit(host):
    from nectargan_losses.schedules import build_schedule

    assert build_schedule({"name": "cx_halving"}, host.registry).at(epoch=0, step=3) == 0.125
    with pytest.raises(PluginError) as exc:
        build_schedule({"name": "cx_dict"}, host.registry)
    assert one_line(exc).startswith("schedule 'cx_dict' (plugin 'contract_plugin') built a dict, not a "
                                    "nectargan_losses.schedules.Schedule")
    with pytest.raises(PluginError) as exc:
        build_schedule({"name": "cx_steps"}, host.registry)
    assert one_line(exc) == ("schedule 'cx_steps' (plugin 'contract_plugin') has unit 'steps'; a schedule's unit is "
                             "'epoch' or 'step'")


def test_a_loss_term_is_a_callable_of_fake_and_real(host):
    from nectargan_losses.manager import LossManager

    manager = LossManager({"add": {"extra": {"loss": "cx_abs"}}}, registry=host.registry)
    fake, real = torch.ones(1, 3, 4, 4), torch.zeros(1, 3, 4, 4)
    assert float(manager.generator_losses(fake, real, fake_logits=torch.zeros(1, 1, 2, 2)).raw["G/extra"]) == 1.0
    with pytest.raises(PluginError) as exc:
        LossManager({"add": {"extra": {"loss": "cx_number"}}}, registry=host.registry)
    assert one_line(exc) == ("loss term 'extra': loss 'cx_number' (plugin 'contract_plugin') built a float, which is "
                             "not callable; a loss term needs a callable loss(fake, real) -> tensor (see "
                             "docs/plugins/contracts.md)")


# -- models: what nectargan models show reports ---------------------------------------------------
def test_reported_geometry_is_shown_and_misreported_geometry_refused(host):
    from nectargan_models.summary import build_meta, geometry

    reported = build_meta(host.registry.get("model", "cx_reported"), {})
    assert geometry(reported, 64, "cx_reported") == {"receptive_field": 4, "output_size": 32}
    assert geometry(reported, 63, "cx_reported") == {"receptive_field": 4, "input_error": "63 is odd; use an even size"}
    assert geometry(torch.nn.Identity(), 64) == {}  # both are optional
    misreported = build_meta(host.registry.get("model", "cx_misreported"), {})
    with pytest.raises(PluginError) as exc:
        geometry(misreported, 64, "cx_misreported")
    assert one_line(exc) == ("model 'cx_misreported': receptive_field must be a positive int (got '4x4'); see "
                             "docs/plugins/contracts.md")


# -- trainers: what --format reference reads ----------------------------------------------------
@pytest.mark.parametrize("trainer, problem", [
    ("cx_nomodel", "declares reference_networks but no reference_model"),
    ("cx_aslist", "reference_networks must map the reference's network names to (tracked network, config key) pairs"),
])
def test_reference_export_needs_both_declarations_in_their_form(host, tmp_path, trainer, problem):
    from nectargan_translate.reference_export import ReferenceExportError, reference_networks

    assert reference_networks({"trainer": "cx_exported"}, tmp_path, host.registry) == \
        {"G": ("generator", "models.generator")}
    with pytest.raises(ReferenceExportError) as exc:
        reference_networks({"trainer": trainer}, tmp_path, host.registry)
    assert one_line(exc).startswith(f"trainer '{trainer}' (plugin 'contract_plugin'): {problem}")


# -- the core: the train loader's sampler --------------------------------------------------------
def test_the_core_tells_any_sampler_with_set_epoch_the_epoch(tiny_config, run_training, nectargan_plugin_host):
    from nectargan_toy.trainer import ToyTrainer  # the toy plugin's trainer, with its sampler swapped

    seen = []

    class Sampler(torch.utils.data.Sampler):
        def __init__(self, n):
            self.n = n

        def set_epoch(self, epoch):
            seen.append(epoch)

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    original = ToyTrainer.train_dataloader

    def loader(self):
        plain = original(self)
        return torch.utils.data.DataLoader(plain.dataset, batch_size=plain.batch_size, sampler=Sampler(len(plain.dataset)))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ToyTrainer, "train_dataloader", loader)
        run_training(tiny_config("toy", toy={"samples": 8}, loop={"epochs": 3}), host=nectargan_plugin_host())
    assert seen == [0, 1, 2]


# -- the page ----------------------------------------------------------------------------------------
def test_every_contract_is_on_the_page_and_the_page_is_linked_from_the_guide():
    text = CONTRACTS.read_text()
    for term in ("batch_size", "`conditional`", "size_multiple", "in_channels", "receptive_field", "output_size",
                 "reference_networks", "reference_model", "capabilities", "distributed_validation", "set_epoch",
                 "ResumableSampler", "Schedule", "GANObjective", "latest_example", "state_dict"):
        assert term in text, term
    assert "(contracts.md)" in (ROOT / "docs" / "plugins" / "authoring.md").read_text()


# -- the core: what train_step returns ----------------------------------------------------------
def test_train_step_must_return_a_mapping(tiny_config, nectargan_plugin_host):
    from nectargan_toy.trainer import ToyTrainer

    @contract_parts.hookimpl
    def train_step(self, batch):
        return None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ToyTrainer, "train_step", train_step)
        run = Run.create(tiny_config("toy", toy={"samples": 8}), host=nectargan_plugin_host())
        with pytest.raises(PluginError) as exc:
            run.fit()
    assert one_line(exc) == "train_step of trainer 'toy' returned None; return a mapping of losses"


def test_the_console_shows_the_first_eight_keys_without_a_dot():
    from nectargan_core.builtin.console import format_values

    values = {"G/l1.raw": 9.0, **{f"k{i}": float(i) for i in range(10)}}
    assert format_values(values) == "  ".join(f"k{i} {i:.4g}" for i in range(8))
    assert format_values(values, 4) == "k0 0  k1 1  k2 2  k3 3"


MANIFEST_DATASET = """
    import torch
    from pydantic import BaseModel, Field
    from nectargan_core import hookimpl

    class Options(BaseModel):
        count: int = 5
        size: int = 32
        batch_size: int = Field(2, ge=1)
        root: str | None = None

    class Pairs(torch.utils.data.Dataset):
        '''Pairs listed by a manifest of its own: no folder layout, no per-split options.'''

        def __init__(self, count=5, size=32, batch_size=2, root=None, split="train", seed=0):
            if root is not None:
                open(f"{root}/manifest.csv").close()  # a manifest that is not there: FileNotFoundError
            self.count, self.size, self.split = count, size, split
            self.pairs = [("a name", "that pix2pix must not read")] * count

        def __len__(self):
            return self.count

        def __getitem__(self, index):
            offset = {"train": 0, "val": 100, "test": 200}[self.split]
            a = torch.rand(3, self.size, self.size, generator=torch.Generator().manual_seed(offset + index)) * 2 - 1
            return {"A": a, "B": a.flip(-1), "path": f"manifest/{self.split}/{index}.png"}

    @hookimpl
    def register_datasets(register):
        register("manifest", "manifest_plugin:Pairs", options=Options)
"""


def test_nectargan_test_reads_any_dataset_that_meets_the_paired_contract(fake_dist, tmp_path):
    """An outside dataset (items A, B and a path; a `pairs` attribute of its own) trains, and test scores it."""
    site = fake_dist("nectargan-manifest", "manifest_plugin", MANIFEST_DATASET)
    (tmp_path / "run.yaml").write_text(
        "trainer: pix2pix\nrun: {name: manifest, output_dir: runs, device: cpu}\nvisualizers: []\n"
        "data: {name: manifest, count: 5, batch_size: 2}\nloop: {epochs: 1}\nexamples: {count: 2}\n"
        "models:\n  generator: {name: unet, depth: 5, ngf: 8, max_width: 32}\n"
        "  discriminator: {name: patchgan, n_layers: 2, ndf: 8, max_width: 32}\n")
    env = {"PYTHONPATH": str(site)}
    trained = run_cli("train", "-c", "run.yaml", cwd=tmp_path, env=env, timeout=300)
    assert trained.returncode == 0, trained.stderr
    run_dir = tmp_path / "runs" / "manifest" / "version_0"
    summary = dict(json.loads((run_dir / "summary.json").read_text())["rows"])
    assert summary["examples"].startswith("2 val images spread over 5"), summary
    assert summary["data"].startswith("manifest: 5 train / 5 val / 5 test pairs"), summary  # the test split built
    assert summary["examples"].endswith(": #1, #4"), summary  # item numbers, drawn by run.seed
    for split in ("test", "train"):
        tested = run_cli("test", str(run_dir), "--split", split, cwd=tmp_path, env=env, timeout=300)
        assert tested.returncode == 0, tested.stderr
        results = next((run_dir / "test").glob(f"*-{split}"))
        metrics = json.loads((results / "metrics.json").read_text())
        names = [row["image"] for row in metrics["per_image"]]
        assert names == [f"{i:04d}.png" for i in range(5)], names
        assert [row["source"] for row in metrics["per_image"]] == [f"manifest/{split}/{i}.png" for i in range(5)]
        for sub in ("images", "inputs", "targets"):
            assert sorted(p.name for p in (results / sub).iterdir()) == names
        assert f"{split}: 5 images" in tested.stdout, tested.stdout
    missing = run_cli("test", str(run_dir), "--data-root", str(tmp_path), cwd=tmp_path, env=env, timeout=300)
    assert (missing.returncode, missing.stderr) == (1, (
        f"error: dataset 'manifest' (plugin 'manifest_plugin' (nectargan-manifest)), test split: "
        f"{tmp_path}/manifest.csv: No such file or directory\n")), missing.stderr


EDGE_METRIC = """
    import torch
    from nectargan_core import hookimpl

    def edge_l1(fake, real):
        '''Mean absolute difference of the horizontal gradients, per image (lower is better).'''
        grad = lambda x: x[..., 1:] - x[..., :-1]
        return (grad(fake) - grad(real)).abs().flatten(1).mean(dim=1)

    @hookimpl
    def register_metrics(register):
        register("edge_l1", "edge_plugin:edge_l1", direction="min", description="Gradient L1")
"""


def test_a_registered_metric_validates_selects_best_and_is_scored_by_test(fake_dist, tmp_path, tiny_paired_dataset):
    site = fake_dist("nectargan-edge", "edge_plugin", EDGE_METRIC)
    env = {"PYTHONPATH": str(site)}
    common = ["--preset", "pix2pix-tiny", "--set", f"data.root={tiny_paired_dataset}", "--set", "run.output_dir=runs",
              "--set", "run.device=cpu", "--set", "visualizers=[]", "--set", "validation.metrics=[l1, edge_l1]"]
    trained = run_cli("train", *common, "--set", "loop.epochs=2", "--set", "checkpoint.best_metric=val/edge_l1",
                      cwd=tmp_path, env=env, timeout=300)
    assert trained.returncode == 0, trained.stderr
    run_dir = next((tmp_path / "runs").glob("*/version_0"))
    vals = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    edges = [r["metrics"]["edge_l1"] for r in vals if r["kind"] == "val"]
    assert len(edges) == 2 and all(isinstance(v, float) for v in edges), vals
    best = torch.load(run_dir / "checkpoints" / "best.pt", map_location="cpu", weights_only=False)
    # auto: lower is better, as registered (the epochs differ, so the other direction would pick the other one)
    assert best["epoch"] == 1 + edges.index(min(edges)) != 1 + edges.index(max(edges)), (best["epoch"], edges)

    tested = run_cli("test", str(run_dir), "--split", "val", cwd=tmp_path, env=env, timeout=300)
    assert tested.returncode == 0, tested.stderr
    results = next((run_dir / "test").glob("*-val"))
    metrics = json.loads((results / "metrics.json").read_text())
    assert set(metrics["mean"]) == {"l1", "psnr", "ssim", "edge_l1"}
    assert all(isinstance(row["edge_l1"], float) for row in metrics["per_image"])
    assert (results / "metrics.csv").read_text().splitlines()[0] == "image,l1,psnr,ssim,edge_l1"
    assert "edge_l1" in tested.stdout and "lower is better" in (results / "index.html").read_text()

    # without the plugin, the metric is an unknown name, said in one line before any run directory
    refused = run_cli("train", *common, "--set", "run.name=refused", cwd=tmp_path)
    assert refused.returncode == 2 and "unknown metric 'edge_l1'" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs" / "refused").exists()


def test_a_metric_registered_without_its_direction_fails_to_load(fake_dist, tmp_path):
    site = fake_dist("nectargan-nodir", "nodir_plugin", """
        from nectargan_core import hookimpl

        @hookimpl
        def register_metrics(register):
            register("sharpness", "nodir_plugin:register_metrics")
    """)
    listed = run_cli("plugins", "list", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert "metric 'sharpness' from plugin 'nodir_plugin': register it with direction='min' or 'max' (got None)" \
        in listed.stdout + listed.stderr, listed.stdout + listed.stderr


def test_a_plugin_s_metric_named_like_a_builtin_is_used_by_its_qualified_name(fake_dist, tmp_path,
                                                                              tiny_paired_dataset):
    """l1, psnr and ssim stay translate's when another plugin registers one of them: bare l1 keeps its meaning (and
    older runs stay testable); the plugin's is scored by its qualified name, in validation and in test."""
    site = fake_dist("nectargan-collide", "collide_plugin", """
        from nectargan_core import hookimpl

        def l1(fake, real):
            '''Twice the mean absolute error, per image.'''
            return 2 * (fake - real).abs().flatten(1).mean(dim=1)

        @hookimpl
        def register_metrics(register):
            register("l1", "collide_plugin:l1", direction="min", description="Twice L1")
    """)
    env = {"PYTHONPATH": str(site)}
    trained = run_cli("train", "--preset", "pix2pix-tiny", "--set", f"data.root={tiny_paired_dataset}", "--set",
                      "run.output_dir=runs", "--set", "run.device=cpu", "--set", "visualizers=[]", "--set",
                      "loop.epochs=1", "--set", "validation.metrics=[l1, nectargan-collide:l1]", cwd=tmp_path, env=env,
                      timeout=300)
    assert trained.returncode == 0, trained.stderr
    run_dir = next((tmp_path / "runs").glob("*/version_0"))
    scores = [json.loads(line)["metrics"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
              if json.loads(line)["kind"] == "val"][-1]
    assert scores["nectargan-collide:l1"] == pytest.approx(2 * scores["l1"], rel=1e-5)

    tested = run_cli("test", str(run_dir), "--split", "val", cwd=tmp_path, env=env, timeout=300)
    assert tested.returncode == 0, tested.stderr
    means = json.loads((next((run_dir / "test").glob("*-val")) / "metrics.json").read_text())["mean"]
    assert means["nectargan-collide:l1"] == pytest.approx(2 * means["l1"], rel=1e-5)


def test_best_metric_must_be_one_validation_computes(tmp_path, tiny_paired_dataset):
    refused = run_cli("train", "--preset", "pix2pix-tiny", "--set", f"data.root={tiny_paired_dataset}", "--set",
                      "run.output_dir=runs", "--set", "run.device=cpu", "--set", "validation.metrics=[l1]", "--set",
                      "checkpoint.best_metric=val/psnr", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        "error: checkpoint.best_metric: 'val/psnr' is not among the metrics validation computes (val/l1); choose one "
        "of them, or add it to validation.metrics")
    assert not (tmp_path / "runs").exists()

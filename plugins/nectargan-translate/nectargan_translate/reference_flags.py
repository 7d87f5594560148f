"""The reference's command-line flags (junyanz/pytorch-CycleGAN-and-pix2pix ``train.py`` and ``test.py``), and what
to write instead here: the hint ``nectargan train --dataroot x`` gets in place of a bare "No such option".

The full mapping, with the reasons, is docs/coming-from-reference.md; this is its command-line half, for the
flags people type from muscle memory. Torch-free: it is read while an error is reported.
"""

from __future__ import annotations

from typing import Optional

GUIDE = "docs/coming-from-reference.md"

#: reference flag -> what ``nectargan train`` takes instead.
TRAIN = {
    "--dataroot": "--set data.root=DIR",
    "--name": "--set run.name=NAME",
    "--checkpoints_dir": "--set run.output_dir=DIR",
    "--model": "--trainer pix2pix or --trainer cyclegan (--preset pix2pix-reference for the whole recipe)",
    "--gpu_ids": "--set run.device=cuda:0 (or cpu; several GPUs: --nproc N)",
    "--netG": "--set models.generator.name=unet_256 (same names)",
    "--netD": "--set models.discriminator.name=patchgan_70 (basic), patchgan or pixelgan",
    "--n_layers_D": "--set models.discriminator.n_layers=N",
    "--norm": "--set models.generator.norm=... and --set models.discriminator.norm=...",
    "--ngf": "--set models.generator.ngf=N",
    "--ndf": "--set models.discriminator.ndf=N",
    "--input_nc": "--set data.in_channels=N",
    "--output_nc": "--set data.out_channels=N",
    "--init_type": "--set models.generator.init=... (and models.discriminator.init)",
    "--no_dropout": "--set models.generator.dropout_layers=0",
    "--dataset_mode": "--set data.layout=aligned (unaligned: the cyclegan trainer's unpaired dataset)",
    "--direction": "--set data.direction=AtoB|BtoA",
    "--serial_batches": "--set data.shuffle=false",
    "--num_threads": "--set data.num_workers=N",
    "--batch_size": "--set data.batch_size=N",
    "--load_size": "--set data.load_size=N",
    "--crop_size": "--set data.crop_size=N",
    "--preprocess": "--set data.load_size=... and data.crop_size=... (null: keep the size)",
    "--no_flip": "--set data.augment=[]",
    "--max_dataset_size": "--set data.max_images=N",
    "--n_epochs": "--set loop.epochs=N+M (with --n_epochs_decay M; the default schedule halves it)",
    "--n_epochs_decay": "--set loop.epochs=N+M (with --n_epochs N)",
    "--epoch_count": "--resume RUN_DIR (it continues exactly; no count needed)",
    "--continue_train": "--resume RUN_DIR (weights, optimizers, schedules, position and RNG)",
    "--lr": "--set optim.lr_g=LR --set optim.lr_d=LR",
    "--beta1": "--set optim.beta1=B",
    "--lr_policy": "--set optim.lr_schedule.name=pix2pix_linear (or cosine, ...)",
    "--gan_mode": "--set loss.gan_mode=vanilla|lsgan|wgan-gp",
    "--lambda_L1": "--set loss.terms.l1.weight=W",
    "--pool_size": "--set pool.size=N (cyclegan)",
    "--lambda_A": "--set loss.lambda_A=W (cyclegan)",
    "--lambda_B": "--set loss.lambda_B=W (cyclegan)",
    "--lambda_identity": "--set loss.lambda_identity=W (cyclegan)",
    "--save_epoch_freq": "--set checkpoint.every_epochs=N",
    "--save_latest_freq": "--set checkpoint.every_steps=N (steps, not images)",
    "--print_freq": "--set loop.log_every_steps=N (steps, not images)",
    "--display_id": "--set visualizers=[console,visdom]",
    "--display_port": "--set visualizers.visdom.port=N",
}

#: reference ``test.py`` flag -> what ``nectargan test`` (or ``predict``) takes instead.
TEST = {
    "--results_dir": "--out DIR",
    "--epoch": "--checkpoint latest|best|EPOCH",
    "--phase": "--split test|val|train",
    "--eval": "--mode eval (the default; the reference's default is --mode train)",
    "--num_test": "no counterpart: every image of the split is tested",
    "--dataroot": "--data-root DIR (a run remembers its data.root)",
    "--name": "the run directory as the first argument (runs/NAME/version_N)",
    "--checkpoints_dir": "the run directory as the first argument",
    "--model": "nothing: the run knows its trainer (nectargan predict for single images)",
    "--direction": "--direction AtoB|BtoA",
    "--netG": "--arch unet_256 with a reference state dict (latest_net_G.pth)",
}


def hint(command: str, option: str) -> Optional[str]:
    """What ``command`` takes for the reference flag ``option`` (``--dataroot`` -> ``--set data.root=DIR``), with
    the guide's name; None for a flag that is not the reference's."""
    table = {"nectargan train": TRAIN, "nectargan test": TEST, "nectargan predict": TEST}.get(command)
    flag = option.split("=", 1)[0]
    if table is None or flag not in table:
        return None
    return f"the reference's {flag} is {table[flag]} here ({GUIDE} maps every flag)"

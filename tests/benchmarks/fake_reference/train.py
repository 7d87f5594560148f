"""A stand-in for the reference's train.py (junyanz/pytorch-CycleGAN-and-pix2pix) for tests of benchmarks/e2e.py.

It takes the reference's option names (those benchmarks/e2e.py passes, and no others: a misspelt
option fails here as it would there), counts the training images the way the reference's aligned
and unaligned datasets do, and prints what the reference prints, in its formats
(util/visualizer.py ``print_current_losses``, train.py's end-of-epoch, save and learning-rate
lines), with a short sleep per step instead of training. Like the real visualizer and html modules
it imports ``wandb`` (guarded) and ``dominate`` at the top, so the benchmark's stand-ins are used.
"""

import argparse
import math
import os
import random
import time

try:
    import wandb  # noqa: F401  (util/visualizer.py)
except ImportError:
    print('Warning: wandb package cannot be found. The option "--use_wandb" will result in error.')
import dominate  # noqa: F401,E402  (util/html.py)
from dominate.tags import a, br, h3, img, meta, p, table, td, tr  # noqa: F401,E402

LOSSES = {"pix2pix": ["G_GAN", "G_L1", "D_real", "D_fake"],
          "cycle_gan": ["D_A", "G_A", "cycle_A", "idt_A", "D_B", "G_B", "cycle_B", "idt_B"]}
IMAGES = (".png", ".jpg", ".jpeg")


def options():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataroot", required=True)
    parser.add_argument("--name", default="experiment_name")
    parser.add_argument("--gpu_ids", default="0")
    parser.add_argument("--checkpoints_dir", default="./checkpoints")
    parser.add_argument("--model", default="cycle_gan")
    parser.add_argument("--ngf", type=int, default=64)
    parser.add_argument("--ndf", type=int, default=64)
    parser.add_argument("--netG", default="resnet_9blocks")
    parser.add_argument("--netD", default="basic")
    parser.add_argument("--norm", default="instance")
    parser.add_argument("--dataset_mode", default=None)
    parser.add_argument("--direction", default="AtoB")
    parser.add_argument("--num_threads", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--load_size", type=int, default=286)
    parser.add_argument("--crop_size", type=int, default=256)
    parser.add_argument("--display_id", type=int, default=1)
    parser.add_argument("--no_html", action="store_true")
    parser.add_argument("--print_freq", type=int, default=100)
    parser.add_argument("--save_latest_freq", type=int, default=5000)
    parser.add_argument("--save_epoch_freq", type=int, default=5)
    parser.add_argument("--epoch_count", type=int, default=1)
    parser.add_argument("--n_epochs", type=int, default=100)
    parser.add_argument("--n_epochs_decay", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--lr_policy", default="linear")
    opt = parser.parse_args()
    if opt.dataset_mode is None:
        opt.dataset_mode = "aligned" if opt.model == "pix2pix" else "unaligned"
    return opt


def count_images(folder):
    return len([f for f in os.listdir(folder) if f.lower().endswith(IMAGES)])


def main():
    opt = options()
    if opt.dataset_mode == "aligned":
        dataset_size = count_images(os.path.join(opt.dataroot, "train"))
    else:
        dataset_size = max(count_images(os.path.join(opt.dataroot, "trainA")),
                           count_images(os.path.join(opt.dataroot, "trainB")))
    os.makedirs(os.path.join(opt.checkpoints_dir, opt.name), exist_ok=True)
    print("The number of training images = %d" % dataset_size)
    print("---------- Networks initialized -------------")
    print("[Network G] Total number of parameters : %.3f M" % 0.125)
    print("-----------------------------------------------")
    rng = random.Random(0)
    total_iters, lr = 0, opt.lr
    n_epochs = opt.n_epochs + opt.n_epochs_decay
    for epoch in range(opt.epoch_count, n_epochs + 1):
        epoch_start_time = time.time()
        iter_data_time = time.time()
        epoch_iter = 0
        for _ in range(math.ceil(dataset_size / opt.batch_size)):
            iter_start_time = time.time()
            t_data = iter_start_time - iter_data_time
            total_iters += opt.batch_size
            epoch_iter += opt.batch_size
            time.sleep(0.01)  # the step
            if total_iters % opt.print_freq == 0:
                t_comp = (time.time() - iter_start_time) / opt.batch_size
                message = "(epoch: %d, iters: %d, time: %.3f, data: %.3f) " % (epoch, epoch_iter, t_comp, t_data)
                for k in LOSSES[opt.model]:
                    message += "%s: %.3f " % (k, rng.uniform(0.1, 2.0))
                print(message)
            if total_iters % opt.save_latest_freq == 0:
                print("saving the latest model (epoch %d, total_iters %d)" % (epoch, total_iters))
            iter_data_time = time.time()
        if epoch % opt.save_epoch_freq == 0:
            print("saving the model at the end of epoch %d, iters %d" % (epoch, total_iters))
        print("End of epoch %d / %d \t Time Taken: %d sec" % (epoch, n_epochs, time.time() - epoch_start_time))
        old_lr = lr
        if epoch > opt.n_epochs:
            lr = opt.lr * (1.0 - max(0, epoch + opt.epoch_count - opt.n_epochs) / float(opt.n_epochs_decay + 1))
        print("learning rate %.7f -> %.7f" % (old_lr, lr))


if __name__ == "__main__":
    main()

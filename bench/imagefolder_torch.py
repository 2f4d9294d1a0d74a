#!/usr/bin/python3
"""PyTorch's DataLoader on an image folder: the peer of imagefolder.c.

The same pipeline as bench/imagefolder.c, the way a PyTorch user writes
it: ImageFolder (PIL decode), RandomResizedCrop(224, scale=(0.08, 1),
ratio=(3/4, 4/3)), RandomHorizontalFlip, ToTensor, Normalize with the
ImageNet mean and standard deviation, a DataLoader with batch_size=32,
shuffle=True and num_workers worker processes. The training step is the
same stand-in: sum the batch, then spin until the training thread has used
--step-us microseconds of CPU time. It prints one row in the C report's format (docs/imagefolder.md),
or with --raw the totals bench_imagefolder turns into that row.

    imagefolder_torch.py FOLDER [--epochs E] [--step-us U] [--seed S]
                         [--workers W] [--interpolation nearest|bilinear]
                         [--raw]

The resize is nearest-neighbour by default, as in the C pipeline, so both
do the same work; torchvision's default is bilinear (--interpolation
bilinear), which costs more. Without torchvision the transforms are done
here with PIL and torch, drawing the crop as torchvision does.
"""
import argparse
import math
import os
import resource
import sys
import time

import torch
from PIL import Image

try:
    from torchvision import datasets, transforms
except ImportError:  # Debian's python3-torchvision is optional
    datasets = transforms = None

SIDE = 224
BATCH = 32
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def random_resized_crop(w, h, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """(x0, y0, cw, ch), drawn as torchvision's RandomResizedCrop does."""
    area = w * h
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * torch.empty(1).uniform_(*scale).item()
        aspect = math.exp(torch.empty(1).uniform_(*log_ratio).item())
        cw = int(round(math.sqrt(target * aspect)))
        ch = int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            y0 = torch.randint(0, h - ch + 1, size=(1,)).item()
            x0 = torch.randint(0, w - cw + 1, size=(1,)).item()
            return x0, y0, cw, ch
    side = min(w, h)
    return (w - side) // 2, (h - side) // 2, side, side


def augment(img, resample, mean, std):
    """RandomResizedCrop, RandomHorizontalFlip, ToTensor and Normalize of
    an RGB PIL image, with PIL and torch."""
    x0, y0, cw, ch = random_resized_crop(*img.size)
    img = img.resize((SIDE, SIDE), resample, box=(x0, y0, x0 + cw, y0 + ch))
    if torch.rand(1).item() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    x = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
    x = x.view(SIDE, SIDE, 3).permute(2, 0, 1).float().div(255)
    return (x - mean) / std


class PlainImageFolder(torch.utils.data.Dataset):
    """ImageFolder and its transforms, for when torchvision is missing."""

    def __init__(self, root, resample):
        classes = sorted(e.name for e in os.scandir(root)
                         if e.is_dir() and not e.name.startswith("."))
        self.samples = [
            (os.path.join(root, c, f), label)
            for label, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))
            if f.lower().endswith((".jpg", ".jpeg"))]
        self.resample = resample
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return augment(img, self.resample, self.mean, self.std), label


def make_dataset(folder, interpolation):
    if datasets is None:
        resample = (Image.NEAREST if interpolation == "nearest"
                    else Image.BILINEAR)
        return PlainImageFolder(folder, resample), "PIL+torch"
    mode = (transforms.InterpolationMode.NEAREST if interpolation == "nearest"
            else transforms.InterpolationMode.BILINEAR)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(SIDE, scale=(0.08, 1.0),
                                     ratio=(3 / 4, 4 / 3),
                                     interpolation=mode),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    return datasets.ImageFolder(folder, transform=tf), "torchvision"


def train_step(x, step_us):
    """Read every float, then burn the rest of step_us of this thread's CPU
    time (as the C benchmark does: a step that gets less CPU takes longer)."""
    t0 = time.thread_time()
    acc = float(x.sum())
    while (time.thread_time() - t0) * 1e6 < step_us:
        pass
    return acc


def cpu_seconds():
    """User + system time of this process and its reaped children: the
    DataLoader's workers count once each epoch's iterator has joined them."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--step-us", type=float, default=2000)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interpolation", choices=("nearest", "bilinear"),
                    default="nearest")
    ap.add_argument("--raw", action="store_true",
                    help="print totals for bench_imagefolder")
    a = ap.parse_args()

    # The training loop is one thread, as in the C benchmark; the workers
    # already run their transforms on one thread each.
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    ds, how = make_dataset(a.folder, a.interpolation)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True,
                                         num_workers=a.workers)
    sink = 0.0
    images = epochs = 0
    wait = 0.0
    t0, c0 = time.perf_counter(), cpu_seconds()
    for _ in range(a.epochs):
        it = iter(loader)
        while True:
            w0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - w0
            sink += train_step(x, a.step_us) + int(y[0])
            images += len(y)
        del it  # its workers are joined (reaped) once it is exhausted
        epochs += 1
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    if a.raw:
        print(f"raw images={images} wall={wall:.6f} cpu={cpu:.6f} "
              f"wait={wait:.6f} epochs={epochs} sink={sink:.1f}")
        return 0
    print(f"# {len(ds)} images, {a.folder}; {a.epochs} epoch(s), batch "
          f"{BATCH}, step {a.step_us:.0f} us; {how}, {a.interpolation}")
    print(f"{'config':<18} {'workers':>7} {'images':>6} {'img/s':>8} "
          f"{'cpu':>8} {'wait':>7} {'s/epoch':>8}")
    print(f"{'torch-dataloader':<18} {str(a.workers) + ' proc':>7} "
          f"{images:6d} {images / wall:8.1f} {100 * cpu / wall:7.0f}% "
          f"{100 * wait / wall:6.1f}% {wall / max(epochs, 1):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Decoding and augmenting JPEGs: eachobs's DataLoader against PyTorch's.

A folder of --images JPEGs (800) of 500 x 375 pixels in 10 class
folders, made here once with PIL (gradients, discs, noise; quality 85).
The pipeline a torchvision user writes: ImageFolder (PIL decode),
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize with
the ImageNet mean and standard deviation; batches of 32, shuffled,
nothing done with a batch but the checks. Rows:

  torch 0        DataLoader, num_workers 0
  torch 2 proc   DataLoader, num_workers 2, worker processes,
                 persistent_workers=True
  eachobs 2/3    eachobs.DataLoader on the same ImageFolder, 2 and 3
                 threads: __getitem__ runs under the GIL, which PIL and
                 torch release while they decode and compute
  native 2       eachobs.NativeDataset over the same folder whose getobs
                 is C: examples/jpeg_folder.c (libturbojpeg decode, the
                 same crop drawn the same way but resized nearest-
                 neighbour, flip, normalize) behind bench/python/
                 jpeg_native.c, built here with cc into build-pybench/

The torch and eachobs rows resize bilinearly (torchvision's default;
--interpolation nearest does the native row's work). Every loader is made
once, runs one untimed epoch, then --rounds epochs interleaved with the
others; the table shows median images/s, their range, the CPU the process
and its workers used (in cores) and each row's rate over torch's with 0
workers. Checked every epoch: each class as often as the folder holds
it; the first batch's shape, and its values within the normalized range.
On a shared 2-core machine compare rows of one run, not runs.

    jpeg.py [--images N] [--dir DIR] [--rounds R] [--seed S]
            [--interpolation bilinear|nearest] [--no-native] [--quick]
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
from PIL import Image

import _support as S

SIDE = 224
BATCH = 32
WIDTH, HEIGHT = 500, 375
CLASSES = 10
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def generate(folder, n):
    """n JPEGs in folder/cNN/, once: folder/.complete marks a finished
    folder."""
    done = os.path.join(folder, ".complete")
    if os.path.exists(done):
        return
    print(f"# generating {n} JPEGs of {WIDTH}x{HEIGHT} in {folder}",
          flush=True)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    for i in range(n):
        rng = np.random.default_rng(i)
        cls = i % CLASSES
        img = np.empty((HEIGHT, WIDTH, 3), np.int16)
        img[..., 0] = xx * 255 // WIDTH * (cls + 1) // 11
        img[..., 1] = yy * 255 // HEIGHT
        img[..., 2] = cls * 25
        for _ in range(3):
            cx, cy = rng.integers(0, WIDTH), rng.integers(0, HEIGHT)
            r = rng.integers(20, 120)
            img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = \
                rng.integers(0, 256, 3)
        img += rng.integers(-16, 16, (HEIGHT, WIDTH, 1), dtype=np.int16)
        sub = os.path.join(folder, f"c{cls:02d}")
        os.makedirs(sub, exist_ok=True)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
            os.path.join(sub, f"img{i:06d}.jpg"), quality=85)
    open(done, "w").close()


def image_folder(folder, interpolation):
    from torchvision import datasets, transforms
    mode = getattr(transforms.InterpolationMode, interpolation.upper())
    tf = transforms.Compose([
        transforms.RandomResizedCrop(SIDE, interpolation=mode),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    return datasets.ImageFolder(folder, transform=tf)


def build_native():
    """The path of libjpeg_native.so, built (again) when older than its
    sources; or (None, why)."""
    srcs = [os.path.join(ROOT, "examples", "jpeg_folder.c"),
            os.path.join(HERE, "jpeg_native.c")]
    out_dir = os.path.join(ROOT, "build-pybench")
    lib = os.path.join(out_dir, "libjpeg_native.so")
    if (os.path.exists(lib) and os.path.getmtime(lib)
            >= max(os.path.getmtime(s) for s in srcs)):
        return lib, None
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        return None, f"no C compiler ({cc})"
    os.makedirs(out_dir, exist_ok=True)
    cmd = [cc, "-O2", "-shared", "-fPIC",
           "-I" + os.path.join(ROOT, "include"),
           "-I" + os.path.join(ROOT, "examples"),
           "-Deachobs_seed=jpeg_native_seed", *srcs, "-lturbojpeg", "-lm",
           "-o", lib]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, (f"cannot build it ({last}; Debian: apt install "
                      "libturbojpeg0-dev)")
    return lib, None


class Native:
    """The C getobs and its ctx, through ctypes."""

    def __init__(self, eachobs, lib, folder, seed):
        self.lib = ctypes.CDLL(lib)
        L = self.lib
        L.jpeg_native_open.restype = ctypes.c_void_p
        L.jpeg_native_open.argtypes = [ctypes.c_char_p, ctypes.c_uint64,
                                       ctypes.c_void_p]
        L.jpeg_native_count.restype = ctypes.c_size_t
        L.jpeg_native_count.argtypes = [ctypes.c_void_p]
        L.jpeg_native_set_epoch.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        L.jpeg_native_close.argtypes = [ctypes.c_void_p]
        self.ctx = L.jpeg_native_open(folder.encode(), seed,
                                      eachobs.FIELD_ADDRESS)
        if not self.ctx:
            raise RuntimeError(f"{folder}: no class folders with JPEGs")
        self.n = L.jpeg_native_count(self.ctx)
        getobs = ctypes.cast(L.jpeg_native_getobs, ctypes.c_void_p).value
        self.dataset = eachobs.NativeDataset(
            getobs, self.n, ctx=self.ctx,
            fields={"x": ("float32", (3, SIDE, SIDE)), "y": ("int64", ())})
        self.epoch = 0

    def next_epoch(self):
        self.lib.jpeg_native_set_epoch(self.ctx, self.epoch)
        self.epoch += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=800)
    ap.add_argument("--dir", help="the folder of JPEGs (default: "
                    "/tmp/eachobs-bench-jpeg-500x375-N)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interpolation", choices=("bilinear", "nearest"),
                    default="bilinear")
    ap.add_argument("--no-native", action="store_true",
                    help="leave the C getobs out")
    ap.add_argument("--quick", action="store_true",
                    help="128 images: about 10 s")
    a = ap.parse_args()
    if a.quick:
        a.images = min(a.images, 128)
    a.dir = a.dir or f"/tmp/eachobs-bench-jpeg-{WIDTH}x{HEIGHT}-{a.images}"
    prog = "jpeg.py"

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    eachobs, why = S.import_eachobs()
    generate(a.dir, a.images)
    ds = image_folder(a.dir, a.interpolation)
    n = len(ds)
    want = torch.bincount(torch.tensor(ds.targets), minlength=CLASSES)
    lo = min((0 - m) / s for m, s in zip(MEAN, STD)) - 1e-4
    hi = max((1 - m) / s for m, s in zip(MEAN, STD)) + 1e-4
    kw = dict(batch_size=BATCH, shuffle=True)
    rows = [S.Config("torch", w, "-", lambda w=w: S.torch_loader(ds, w, **kw))
            for w in (0, 2)]
    native, note = None, None
    if eachobs is not None:
        for w in (2, 3):
            rows.append(S.Config(
                "eachobs", w, "threaded",
                lambda w=w: S.eachobs_loader(eachobs, ds, w, "threaded",
                                             seed=a.seed, **kw)))
        if not a.no_native:
            lib, note = build_native()
            if lib:
                native = Native(eachobs, lib, a.dir, a.seed)
                if native.n != n:
                    S.fail(prog, f"the C getobs lists {native.n} files, "
                           f"ImageFolder {n}")
                rows.append(S.Config(
                    "native", 2, "threaded",
                    lambda: S.eachobs_loader(eachobs, native.dataset, 2,
                                             "threaded", seed=a.seed,
                                             **kw)))

    def one(c, loader):
        if c.loader == "native":
            native.next_epoch()
        classes = torch.zeros(CLASSES, dtype=torch.int64)
        with S.Timed() as t:
            for i, b in enumerate(loader):
                x, y = (b["x"], b["y"]) if isinstance(b, dict) else b
                classes += torch.bincount(y, minlength=CLASSES)
                if i == 0 and (x.shape[1:] != (3, SIDE, SIDE)
                               or float(x.min()) < lo
                               or float(x.max()) > hi):
                    S.fail(prog, f"{c.loader} {c.workers_text}: a batch "
                           f"of shape {tuple(x.shape)}, values "
                           f"{float(x.min()):.3f}..{float(x.max()):.3f}")
        if not torch.equal(classes, want):
            S.fail(prog, f"{c.loader} {c.workers_text}: an epoch's labels "
                   f"are not the folder's: {classes.tolist()}")
        return t.wall, t.cpu, None

    print(f"# {n} JPEGs of {WIDTH}x{HEIGHT} in {a.dir}; RandomResizedCrop"
          f"(224, {a.interpolation}), flip, ToTensor, Normalize; batch "
          f"{BATCH}, shuffled; {a.rounds} rounds interleaved, medians")
    print(f"# {S.machine_line()}")
    print(f"# {S.eachobs_line(eachobs, why)}")
    if note:
        print(f"# the C getobs: {note}: its row is left out")
    S.run_rounds(rows, a.rounds, one)
    base = n / S.med(rows[0].walls)
    table = []
    for c in rows:
        rate = n / S.med(c.walls)
        cores = S.med([cpu / w for cpu, w in zip(c.cpus, c.walls)])
        getitem = "C (turbojpeg)" if c.loader == "native" else "Python (PIL)"
        table.append([c.loader, c.workers_text, getitem, f"{rate:.1f}",
                      S.spread(c.walls, n), f"{cores:.2f}",
                      f"{rate / base:.2f}"])
    S.print_table(["loader", "workers", "sample", "img/s", "range", "cores",
                   "vs torch 0"], table,
                  ["<", "<", "<", ">", ">", ">", ">"])
    if native is not None:
        native.lib.jpeg_native_close(native.ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())

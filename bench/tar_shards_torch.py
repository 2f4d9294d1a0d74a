#!/usr/bin/python3
"""Tar shards three ways, in one run: examples/tar_shards.c (eachobs
streams, libarchive, libturbojpeg), the same images as a folder through
examples/imagefolder.c (eachobs_parallel), and PyTorch's DataLoader over an
IterableDataset that reads the same tar files with Python's tarfile and
decodes with PIL (shards split over the worker processes, as PyTorch's
documentation shows), all with the same crop, flip and normalization,
batches of 32 and the same number of threads or workers. Rounds alternate
between them; medians of the rounds, images per second: of the whole
process for the C programs (their start takes milliseconds), of the
epochs' loop for PyTorch (its imports, a second or two, left out).

    tar_shards_torch.py TAR_EXAMPLE FOLDER_EXAMPLE FOLDER [--shards K]
                        [--threads T] [--epochs E] [--rounds R]
    tar_shards_torch.py --worker SHARD_DIR THREADS EPOCHS   (the peer)

FOLDER is a folder of JPEGs with one sub-folder per class; the shards are
made from it with tarfile, KEY.jpg and KEY.cls per sample.
"""
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

BATCH = 32


def peer(shard_dir, threads, epochs):
    import io
    import torch
    from PIL import Image
    # The folder peer's transforms, the crop drawn as torchvision does.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from imagefolder_torch import MEAN, STD, augment

    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)

    class Shards(torch.utils.data.IterableDataset):
        def __init__(self, paths):
            self.paths = paths

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            mine = self.paths if info is None else \
                self.paths[info.id::info.num_workers]
            for path in mine:
                with tarfile.open(path) as t:
                    sample = {}
                    for m in t:
                        key, ext = m.name.split(".", 1)
                        if sample and sample["key"] != key:
                            yield self.decode(sample)
                            sample = {}
                        sample["key"] = key
                        sample[ext] = t.extractfile(m).read()
                    if sample:
                        yield self.decode(sample)

        def decode(self, s):
            img = Image.open(io.BytesIO(s["jpg"])).convert("RGB")
            return augment(img, Image.NEAREST, mean, std), int(s["cls"])

    paths = sorted(os.path.join(shard_dir, p) for p in os.listdir(shard_dir)
                   if p.endswith(".tar"))
    n = 0
    t0 = time.monotonic()
    for _ in range(epochs):
        for x, y in torch.utils.data.DataLoader(
                Shards(paths), batch_size=BATCH, num_workers=threads):
            n += len(y)
    print(f"{n} images {time.monotonic() - t0:.6f} s")


def make_shards(folder, out, nshards):
    """Samples KEY.jpg + KEY.cls of the JPEGs of folder (one sub-folder
    per class), keys numbered in folder order, dealt to nshards tar files
    in runs; returns {key: label}."""
    classes = sorted(d for d in os.listdir(folder)
                     if os.path.isdir(os.path.join(folder, d)))
    files = [(i, os.path.join(folder, c, f)) for i, c in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(folder, c)))
             if f.lower().endswith((".jpg", ".jpeg"))]
    per = (len(files) + nshards - 1) // nshards
    cls = os.path.join(out, "cls.tmp")
    labels = {}
    for s in range(nshards):
        with tarfile.open(os.path.join(out, f"shard-{s:04d}.tar"), "w") as t:
            for key in range(s * per, min(len(files), (s + 1) * per)):
                label, path = files[key]
                labels[key] = label
                t.add(path, arcname=f"{key:06d}.jpg")
                with open(cls, "w") as f:
                    f.write(str(label))
                t.add(cls, arcname=f"{key:06d}.cls")
    os.unlink(cls)
    return labels


def timed(cmd):
    """Seconds of the run: the peer's own loop when it reports one (so
    that Python's and torch's imports are not counted), else the whole
    process."""
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {r.stderr}")
    secs = time.monotonic() - t0
    words = r.stdout.split()
    if len(words) == 4 and words[1] == "images" and words[3] == "s":
        secs = float(words[2])
    return secs


def main(args):
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if args[:1] == ["--worker"]:
        peer(args[1], int(args[2]), int(args[3]))
        return 0
    if len(args) < 3:
        print("usage: tar_shards_torch.py TAR_EXAMPLE FOLDER_EXAMPLE FOLDER "
              "[--shards K] [--threads T] [--epochs E] [--rounds R] "
              "(try --help)", file=sys.stderr)
        return 2
    tar_ex, folder_ex, folder = args[:3]
    opts = {"--shards": 16, "--threads": 2, "--epochs": 3, "--rounds": 5}
    rest = args[3:]
    while rest:
        if rest[0] not in opts or len(rest) < 2:
            print(f"tar_shards_torch.py: unknown argument {rest[0]!r}",
                  file=sys.stderr)
            return 2
        opts[rest[0]] = int(rest[1])
        rest = rest[2:]
    t, e = str(opts["--threads"]), str(opts["--epochs"])
    with tempfile.TemporaryDirectory() as d:
        n = len(make_shards(folder, d, opts["--shards"])) * opts["--epochs"]
        runs = {
            "eachobs stream, tar shards": [tar_ex, d, "--epochs", e,
                                           "--threads", t],
            "eachobs_parallel, folder": [folder_ex, folder, "--epochs", e,
                                         "--threads", t],
            "eachobs stream, 1 thread": [tar_ex, d, "--epochs", e,
                                         "--threads", "1"],
            "torch IterableDataset, tar": [sys.executable, __file__,
                                           "--worker", d, t, e],
        }
        secs = {k: [] for k in runs}
        for _ in range(opts["--rounds"]):
            for k, cmd in runs.items():
                secs[k].append(timed(cmd))
    print(f"{n // opts['--epochs']} images in {opts['--shards']} shards, "
          f"{opts['--epochs']} epochs, {t} threads or workers, medians of "
          f"{opts['--rounds']} rounds")
    base = n / statistics.median(secs["eachobs stream, tar shards"])
    for k, v in secs.items():
        rate = n / statistics.median(v)
        print(f"{k:30s} {rate:8.1f} images/s  stream / this {base / rate:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

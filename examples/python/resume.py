#!/usr/bin/python3
"""Stop an epoch in the middle and finish it in another process: the
loader's state_dict() goes into the checkpoint beside the model's, and a
new loader given it yields exactly the samples the first did not.

    resume.py [--help]         # runs both halves, checks every sample once
    resume.py first CKPT       # trains 20 steps, saves CKPT
    resume.py rest CKPT        # loads CKPT, finishes the epoch
"""
import subprocess
import sys

import torch
import eachobs


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 5000

    def __getitem__(self, i):
        return torch.tensor([float(i)]), i


def make_loader():
    return eachobs.DataLoader(Numbers(), batch_size=64, shuffle=True, seed=7,
                              in_order=False)


def first(path):
    loader = make_loader()
    seen = []
    for step, (x, y) in enumerate(loader):
        seen += y.tolist()
        if step == 19:
            torch.save({"loader": loader.state_dict(), "seen": seen}, path)
            break


def rest(path):
    ckpt = torch.load(path)
    loader = make_loader()
    loader.load_state_dict(ckpt["loader"])
    before = ckpt["seen"]
    after = []
    for x, y in loader:   # the rest of the epoch
        after += y.tolist()
    assert sorted(before + after) == list(range(5000)), "lost or repeated"
    print(f"{len(before)} samples before the restart, {len(after)} after: "
          "each once")


def main():
    args = sys.argv[1:]
    if args in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if len(args) == 2 and args[0] in ("first", "rest"):
        (first if args[0] == "first" else rest)(args[1])
        return 0
    if args:
        print("usage: resume.py [first|rest CKPT] (try --help)",
              file=sys.stderr)
        return 2
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/ckpt.pt"
        for half in ("first", "rest"):
            subprocess.run([sys.executable, __file__, half, path], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

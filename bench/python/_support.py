"""What the Python benchmarks share: finding eachobs, making both loaders,
interleaved timed rounds, CPU time of a process and its workers, tables.

Not a program: bench/python/*.py import it from their own folder.
"""
import os
import resource
import statistics
import sys
import time

import torch

CLK_TCK = os.sysconf("SC_CLK_TCK")


def import_eachobs():
    """(module, None), or (None, why) when the package cannot be imported:
    the programs then print their torch rows and say why eachobs is
    missing."""
    try:
        import eachobs
    except ImportError as e:
        return None, str(e)
    return eachobs, None


def machine_line():
    """Where the figures come from: the cores and how busy they were."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} cores (load average {load} at the start), "
            f"torch {torch.__version__} with {torch.get_num_threads()} "
            f"intra-op thread(s), Python {sys.version.split()[0]}")


def blas_line():
    """Which BLAS torch's matrix products run on, from this process's
    mappings: Debian's reference BLAS (netlib) makes a training step about
    15 times slower than OpenBLAS."""
    torch.ones(8, 8) @ torch.ones(8, 8)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if ".so" in line}
    for lib in sorted(libs):
        base = os.path.basename(lib)
        if "openblas" in base or "mkl" in base:
            return f"BLAS {lib}"
    for lib in sorted(libs):
        if os.path.basename(lib).startswith("libblas.so"):
            real = os.path.realpath(lib)
            if "/blas/" in real:
                return (f"the reference BLAS {real} (a training step about "
                        "15 times OpenBLAS's; tools/pybench.sh runs with "
                        "OpenBLAS)")
            return f"BLAS {real}"
    return "BLAS: none found in the process"


def eachobs_line(eachobs, why):
    if eachobs is None:
        return f"eachobs: not importable ({why}): its rows are left out"
    version = getattr(eachobs, "__version__", "?")
    return f"eachobs {version} from {os.path.dirname(eachobs.__file__)}"


def _children_cpu():
    """CPU seconds of this process's live children (DataLoader workers),
    read from /proc: RUSAGE_CHILDREN counts a child only once reaped, and
    persistent workers live until their loader goes."""
    me = os.getpid()
    total = 0.0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == me:  # ppid
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def cpu_seconds():
    """User + system seconds of this process (every thread), its live
    children and its reaped ones."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
            + _children_cpu())


class Timed:
    """Wall and CPU seconds of a with-block."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.cpu = cpu_seconds() - self.c0
        return False


def torch_loader(ds, workers, **kw):
    """PyTorch's DataLoader as the benchmarks use it: worker processes
    kept between epochs (persistent_workers) when there are any."""
    return torch.utils.data.DataLoader(
        ds, num_workers=workers, persistent_workers=workers > 0, **kw)


def eachobs_loader(eachobs, ds, workers, executor, **kw):
    """eachobs's DataLoader with the same arguments; its threads kept
    between epochs too when there are any (None: the library's choice)."""
    return eachobs.DataLoader(
        ds, num_workers=workers, executor=executor,
        persistent_workers=workers != 0, **kw)


class Config:
    """One row: a name for the table and what each round runs."""

    def __init__(self, loader, workers, executor, make, note=""):
        self.loader, self.workers, self.executor = loader, workers, executor
        self.make, self.note = make, note
        self.obj = None
        self.walls, self.cpus, self.extra = [], [], []

    @property
    def workers_text(self):
        if self.workers is None:
            return "default"
        if self.loader.startswith("torch"):
            return f"{self.workers} proc" if self.workers else "0"
        return f"{self.workers} thr" if self.workers else "0"

    def get(self):
        if self.obj is None:
            self.obj = self.make()
        return self.obj

    def close(self):
        self.obj = None


def run_rounds(configs, rounds, one, warmup=True):
    """Each config's loader made once; a warm-up round (workers started,
    pages touched) unless warmup is false; then `rounds` rounds, every
    config once a round, the order rotated each round so that none always
    runs first. one(config, loader) runs one timed pass and returns
    (wall_s, cpu_s, extra)."""
    # torch's workers fork: make and start them before any eachobs thread
    # exists, so that no fork copies a process with loader threads in it.
    order = sorted(configs, key=lambda c: not c.loader.startswith("torch"))
    if warmup:
        for c in order:
            one(c, c.get())
    for r in range(rounds):
        k = r % len(configs)
        for c in configs[k:] + configs[:k]:
            wall, cpu, extra = one(c, c.get())
            c.walls.append(wall)
            c.cpus.append(cpu)
            c.extra.append(extra)
    for c in configs:
        c.close()


def med(xs):
    return statistics.median(xs)


def spread(xs, per=1.0):
    """'lo-hi' of per/x over the rounds: the range of a rate."""
    rates = sorted(per / x for x in xs)
    return f"{rates[0]:.0f}-{rates[-1]:.0f}"


def print_table(headers, rows, aligns=None):
    """A plain table: a header line, then one line a row; columns right-
    aligned except those whose align is '<'."""
    aligns = aligns or ["<"] + [">"] * (len(headers) - 1)
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        print("  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, aligns, widths))
              .rstrip())
    sys.stdout.flush()


def fail(prog, what):
    """A wrong result is a failure, not a number."""
    sys.exit(f"{prog}: {what}")

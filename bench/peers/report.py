#!/usr/bin/env python3
"""Turn the peers' CSV rows into the side-by-side table, peers.csv and the
gnuplot data for peers.png. Called by tools/peers.sh.

Usage: report.py RAW_CSV CALIB_CSV OUT_DIR

RAW_CSV: the rows every peer printed (peer.h), CALIB_CSV: t_us,t_sleep_ns
from this run. Writes OUT_DIR/peers.csv (every row with t_sleep_ns,
ideal_ms, efficiency and items_per_s added), OUT_DIR/peers-eff.dat and
OUT_DIR/peers.gp (efficiency against P, one panel per t), and prints the
table: rows are cases, columns eachobs's variants and the peers, last the
eachobs / best peer ratios.
"""
import csv
import math
import sys

FIELDS = ["peer", "variant", "case", "t_us", "P", "n", "batch", "ordered",
          "reps", "median_ms", "min_ms", "max_ms", "note"]

# Table columns: (title, peer, batch); batch 0 for unbatched peers.
COLUMNS = [
    ("eachobs thr", "eachobs", "threaded", 0),
    ("eachobs bg", "eachobs", "background", 0),
    ("eachobs pool", "eachobs", "pool", 0),
    ("eachobs b64", "eachobs", "b64", 0),
    ("handpool", "handpool", None, 0),
    ("tbb", "tbb", None, 0),
    ("libtorch b1", "libtorch", None, 1),
    ("libtorch b64", "libtorch", None, 64),
    ("pytorch b1", "pytorch", None, 1),
    ("pytorch b64", "pytorch", None, 64),
]
EACHOBS = COLUMNS[:4]
PEERS = COLUMNS[4:]


def column_of(r):
    for c in COLUMNS:
        if (r["peer"] == c[1] and (c[2] is None or r["variant"] == c[2])
                and int(r["batch"]) == c[3]):
            return c[0]
    return None


def load(raw_path, calib_path):
    t_sleep = {}
    with open(calib_path) as f:
        for line in f:
            t_us, ns = line.strip().split(",")
            t_sleep[int(t_us)] = float(ns)
    rows = []
    with open(raw_path) as f:
        for r in csv.DictReader(f, fieldnames=FIELDS):
            r["col"] = column_of(r)
            n, p, t_us = int(r["n"]), int(r["P"]), int(r["t_us"])
            wall = float(r["median_ms"])
            r["t_sleep_ns"] = r["ideal_ms"] = r["efficiency"] = ""
            r["items_per_s"] = ""
            if r["case"] == "sleep":
                ts = t_sleep[t_us]
                ideal = math.ceil(n / p) * ts / 1e6
                r["t_sleep_ns"] = f"{ts:.0f}"
                r["ideal_ms"] = f"{ideal:.3f}"
                r["efficiency"] = f"{ideal / wall:.4f}"
            if r["case"] in ("sleep", "noop"):
                r["items_per_s"] = f"{n / wall * 1e3:.0f}"
            rows.append(r)
    return t_sleep, rows


def write_csv(rows, path):
    out = FIELDS[:-1] + ["t_sleep_ns", "ideal_ms", "efficiency",
                         "items_per_s", "note"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=out, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def si(x):
    for unit, k in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= k:
            return f"{x / k:.3g}{unit}"
    return f"{x:.3g}"


def cases(rows):
    """The table's rows, in run order: (title, key, kind)."""
    seen, out = set(), []
    for r in rows:
        if r["case"] == "sleep":
            key = ("sleep", int(r["t_us"]), int(r["P"]), r["ordered"])
            title = f"sleep {int(r['t_us'])}us P={r['P']}"
        elif r["case"] == "noop":
            key = ("noop", 0, int(r["P"]), r["ordered"])
            title = (f"noop P={r['P']} "
                     + ("ordered" if r["ordered"] == "1" else "unord."))
        else:
            key = ("first", 0, int(r["P"]), r["ordered"])
            title = f"1st item P={r['P']}"
        if key not in seen:
            seen.add(key)
            out.append((title, key))
    return out


def cell_rows(rows, key):
    kind, t_us, p, ordered = key
    return {r["col"]: r for r in rows
            if r["col"] and r["case"] == kind and int(r["t_us"]) == t_us
            and int(r["P"]) == p and r["ordered"] == ordered}


def score(kind, r):
    """Bigger is better: efficiency, items/s, or 1 / time to first."""
    if kind == "sleep":
        return float(r["efficiency"])
    if kind == "noop":
        return float(r["items_per_s"])
    return 1.0 / float(r["median_ms"])


def show(kind, r):
    if r is None:
        return "-"
    mark = "*" if (r["peer"] == "pytorch" and r["ordered"] == "0") else ""
    if kind == "sleep":
        return f"{float(r['median_ms']):.0f}/{float(r['efficiency']):.2f}{mark}"
    if kind == "noop":
        return f"{si(float(r['items_per_s']))}/s{mark}"
    return f"{float(r['median_ms']):.2f}ms{mark}"


def print_table(rows, t_sleep):
    present = [c for c in COLUMNS if any(r["col"] == c[0] for r in rows)]
    w0, w = 22, 13
    print("# t_sleep (mean of one sleep, one thread, this run): "
          + "  ".join(f"{t}us -> {ns / 1e3:.1f}us"
                      for t, ns in sorted(t_sleep.items(), reverse=True)))
    print("# sleep cells: median wall ms / efficiency (ideal = "
          "ceil(n/P) * t_sleep); noop: items/s; 1st item: start to first "
          "item; * ordered by nature (no unordered mode)")
    print("# ratios: each eachobs variant (thr THREADED, bg BACKGROUND, pool "
          "BACKGROUND on an eachobs_pool, b64 THREADED in batches of 64) "
          "over the best peer, > 1 means eachobs is better")
    print(f"{'case':<{w0}}" + "".join(f"{c[0]:>{w}}" for c in present)
          + "".join(f"{c[0].split()[1] + '/best':>10}" for c in EACHOBS)
          + f"{'  best peer':<14}")
    for title, key in cases(rows):
        cells = cell_rows(rows, key)
        line = f"{title:<{w0}}" + "".join(
            f"{show(key[0], cells.get(c[0])):>{w}}" for c in present)
        peers = [(score(key[0], cells[c[0]]), c[0]) for c in PEERS
                 if c[0] in cells]
        best = max(peers) if peers else None
        for c in EACHOBS:
            r = cells.get(c[0])
            line += (f"{score(key[0], r) / best[0]:>10.2f}"
                     if r is not None and best else f"{'-':>10}")
        line += f"  {best[1] if best else '-'}"
        print(line)


def write_plot(rows, t_sleep, out_dir):
    present = [c for c in COLUMNS if any(r["col"] == c[0]
                                         and r["case"] == "sleep"
                                         for r in rows)]
    ts = sorted(t_sleep, reverse=True)
    n = max((int(r["n"]) for r in rows if r["case"] == "sleep"), default=0)
    with open(f"{out_dir}/peers-eff.dat", "w") as f:
        for t in ts:
            f.write(f"# t = {t} us\nP " + " ".join(
                c[0].replace(" ", "_") for c in present) + "\n")
            ps = sorted({int(r["P"]) for r in rows if r["case"] == "sleep"
                         and int(r["t_us"]) == t})
            for p in ps:
                cells = cell_rows(rows, ("sleep", t, p, "0"))
                f.write(f"{p} " + " ".join(
                    cells[c[0]]["efficiency"] if c[0] in cells else "NaN"
                    for c in present) + "\n")
            f.write("\n\n")
    with open(f"{out_dir}/peers.gp", "w") as f:
        f.write(f"""set terminal pngcairo size {400 * len(ts) + 200},480 \
font ',10' noenhanced
set output '{out_dir}/peers.png'
set multiplot layout 1,{len(ts)} title \
'TimeDataset, n = {n}: efficiency = ceil(n/P) * t_sleep / wall (one run)'
set logscale x 2
set xtics (2, 8, 16, 64)
set xrange [1.5:90]
set yrange [0:*]
set xlabel 'P (threads or workers)'
set ylabel 'efficiency'
set key top right font ',8'
set grid
""")
        for i, t in enumerate(ts):
            f.write(f"set title 't = {t} us (t_sleep {t_sleep[t] / 1e3:.0f} "
                    "us)'\n")
            f.write("plot " + ", \\\n     ".join(
                f"'{out_dir}/peers-eff.dat' index {i} using 1:{j + 2} "
                f"with linespoints title '{c[0]}'"
                for j, c in enumerate(present)) + "\n")
            if i == 0:
                f.write("unset key\n")
        f.write("unset multiplot\n")


def main():
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    if len(args) != 3 or any(a.startswith("-") for a in args):
        print("usage: report.py RAW_CSV CALIB_CSV OUT_DIR (try --help)",
              file=sys.stderr)
        sys.exit(2)
    raw, calib, out_dir = args
    t_sleep, rows = load(raw, calib)
    write_csv(rows, f"{out_dir}/peers.csv")
    print_table(rows, t_sleep)
    write_plot(rows, t_sleep, out_dir)


if __name__ == "__main__":
    main()

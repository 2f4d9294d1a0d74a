#!/bin/sh
# eachobs side by side with its peers (docs/performance.md, "Side by
# side with the peers"): installs what is missing, builds a release
# build in build-peers, runs eachobs and every peer that is available on
# the same TimeDataset cases in one run, prints one table, and writes
# bench-results/peers.csv and bench-results/peers.png. Then the machine's
# own limit beside eachobs's no-op cost (build-peers/bench/ring, quick or
# not as this run): its table, and bench-results/ring.csv.
#
# Usage: tools/peers.sh [--help] [--quick] [--with-torch] [--reps R]
#   --quick       n / 10, one repetition, PyTorch at P = 2 only, ring
#                 --quick: about a minute (70 s on a busy 2-core machine)
#   --with-torch  also install libtorch-dev and python3-torch (about
#                 1.5 GB; checked against df first) for the two torch peers
#   --reps R      repetitions per cell (default 3; a cell stops repeating
#                 once it has used 1 s)
set -eu

quick=0
with_torch=0
reps=3
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--with-torch) with_torch=1 ;;
	--reps)
		reps=${2-}
		case "$reps" in
		'' | *[!0-9]* | 0)
			echo "peers.sh: --reps needs a count (try --help)" >&2
			exit 2 ;;
		esac
		shift ;;
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "peers.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done
cd "$(dirname "$0")/.."

tools/deps.sh gcc g++ meson ninja-build pkg-config libck-dev libtbb-dev \
	gnuplot-nox python3
if [ "$with_torch" = 1 ]; then
	# The two packages and their dependencies take about 1.5 GB; ask for
	# a margin so that the build and the results still fit.
	free_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
	if [ "$free_kib" -lt $((5 * 1024 * 1024)) ]; then
		echo "peers.sh: only $((free_kib / 1024)) MiB free, torch needs" \
			"about 1.5 GB (5 GB asked): not installing it" >&2
	else
		tools/deps.sh libtorch-dev python3-torch
	fi
fi

if [ -d build-peers ]; then
	meson setup --reconfigure build-peers --buildtype=release \
		-Dtests=disabled >/dev/null
else
	meson setup build-peers --buildtype=release -Dtests=disabled >/dev/null
fi
ninja -C build-peers >/dev/null

bin=build-peers/bench/peers
out=bench-results
mkdir -p "$out"
raw="$out/peers-raw.csv"
calib="$out/peers-calib.csv"
: >"$raw"
: >"$calib"
: >"$out/peers-pytorch.log"

# Which peers run; every skip says why, again at the end.
skipped=""
peers="$bin/peer_eachobs $bin/peer_handpool"
for p in tbb:libtbb-dev libtorch:libtorch-dev; do
	name=${p%%:*}
	if [ -x "$bin/peer_$name" ]; then
		peers="$peers $bin/peer_$name"
	else
		skipped="$skipped
  $name: not built (${p#*:} missing; see meson's message)"
	fi
done
# Debian's python3-torch is for Debian's python3, which need not be the
# first python3 on PATH (pyenv).
pytorch=""
for py in /usr/bin/python3 python3; do
	if "$py" -c 'import torch' 2>/dev/null; then
		pytorch="$py bench/peers/torch_dataloader.py"
		break
	fi
done
[ -n "$pytorch" ] || skipped="$skipped
  pytorch: python3 cannot import torch (python3-torch missing; use --with-torch)"

if [ "$quick" = 1 ]; then
	n=1000 n_noop=100000 reps=1
else
	n=10000 n_noop=1000000
fi
# PyTorch hands every batch to the consumer through a multiprocessing
# queue (1.5-4 ms a batch here), so its batch-1 runs use n / 10 and
# its no-op runs fewer items; the n column of peers.csv says which.
py_n1=$((n / 10))
py_noop=$((n_noop / 50))
py_noop1=$((n_noop / 500))
threads=2,8,16,64
# Starting 64 worker processes took 14-35 s here, against milliseconds
# for 64 threads: PyTorch runs at the smaller counts only.
py_threads=2,8,16
[ "$quick" = 0 ] || py_threads=2

# run PEER ARGS...: a peer's rows into $raw, batch sizes for the batched
# ones; a peer that fails is reported and the run goes on.
run() {
	prog=$1
	shift
	case "$prog" in
	*libtorch) set -- "$@" --batch 1,64 ;;
	esac
	# shellcheck disable=SC2086
	if ! $prog "$@" --reps "$reps" >>"$raw"; then
		echo "peers.sh: $prog $* failed" >&2
		skipped="$skipped
  $(basename "$prog"): failed on $*"
	fi
}

# pyrun N ARGS...: PyTorch at batch 1 with n / 10 and at batch 64.
pyrun() {
	[ -n "$pytorch" ] || return 0
	n1=$1
	n64=$2
	shift 2
	# Its stderr goes to a log: PyTorch warns on every run that P
	# exceeds the cores, which is the point of the run.
	# shellcheck disable=SC2086
	if ! $pytorch "$@" --n "$n64" --n-batch1 "$n1" --batch 1,64 \
			--reps "$reps" 2>>"$out/peers-pytorch.log" >>"$raw"; then
		echo "peers.sh: torch_dataloader.py $* failed" \
			"(see $out/peers-pytorch.log)" >&2
		skipped="$skipped
  pytorch: failed on $*"
	fi
}

start=$(date +%s)
echo "peers.sh: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
	"n = $n, reps <= $reps" >&2
for t in 1000 100 10; do
	"$bin/peer_eachobs" --calibrate --t-us "$t" >>"$calib"
done
for t in 1000 100 10; do
	echo "peers.sh: sleep $t us, P = $threads ($(($(date +%s) - start)) s)" >&2
	for p in $peers; do
		run "$p" --case sleep --t-us "$t" --n "$n" --threads "$threads"
	done
	pyrun "$py_n1" "$n" --case sleep --t-us "$t" --threads "$py_threads"
done
echo "peers.sh: no-op and first item ($(($(date +%s) - start)) s)" >&2
for ord in "" --ordered; do
	for p in $peers; do
		run "$p" --case noop --n "$n_noop" --threads 2 $ord
	done
	pyrun "$py_noop1" "$py_noop" --case noop --threads 2 $ord
done
reps_sleep=$reps
[ "$quick" = 1 ] || reps=11
for p in $peers; do
	run "$p" --case first --n 10000 --threads 16
done
pyrun 10000 10000 --case first --threads 16
reps=$reps_sleep

echo "# eachobs and its peers, one run, $(date -u '+%Y-%m-%d %H:%M UTC')," \
	"$(nproc) CPUs (load average now $(cut -d' ' -f1-3 /proc/loadavg))," \
	"$(($(date +%s) - start)) s"
python3 bench/peers/report.py "$raw" "$calib" "$out"
if command -v gnuplot >/dev/null; then
	gnuplot "$out/peers.gp" && echo "# wrote $out/peers.csv and $out/peers.png"
else
	echo "# wrote $out/peers.csv; gnuplot missing: no $out/peers.png"
fi
[ -z "$pytorch" ] || echo "# pytorch: P = $py_threads only (64 worker" \
	"processes take seconds to start); batch 1 with n = $py_n1"
if [ -n "$skipped" ]; then
	echo "# skipped:$skipped"
else
	echo "# skipped: none"
fi

# The hand-off limit of this machine (a ck_ring between busy threads)
# beside eachobs's own cost per item, so that every report names both.
ring_args=""
[ "$quick" = 0 ] || ring_args=--quick
echo "peers.sh: ring ($(($(date +%s) - start)) s)" >&2
echo
# shellcheck disable=SC2086
if ! build-peers/bench/ring $ring_args --csv "$out/ring.csv"; then
	echo "peers.sh: build-peers/bench/ring $ring_args failed" >&2
	echo "# ring: failed"
fi

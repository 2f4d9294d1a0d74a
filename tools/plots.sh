#!/bin/sh
# The plots a user wants before adopting eachobs (docs/plots.md): installs
# what is missing, builds a release build in build-release, runs the
# benchmarks each plot needs (short runs, with their --csv options) into
# bench-results/, and draws docs/img/plot-*.png with the gnuplot scripts
# in bench/plots/.
#
# Usage: tools/plots.sh [--help] [--reps R] [--redraw] [PLOT]...
#   PLOT      cost, batches, buffersize or threads (default: all four)
#               cost        throughput against the cost of one getobs,
#                           eachobs beside the other loaders built here
#               batches     batches in place against single observations,
#                           by observation size
#               buffersize  memory and throughput against buffersize
#               threads     efficiency against threads, sleep-bound and
#                           CPU-bound getobs
#   --reps R  runs per point, the median is drawn (default 3)
#   --redraw  draw from the CSV files already in bench-results/; run
#             nothing
#
# About 3 minutes on a 2-core machine. Each plot states the machine,
# how many of its cores other programs used while its benchmarks ran, and
# the load average (1 minute) before they began.
set -eu

reps=3
redraw=0
plots=""
while [ $# -gt 0 ]; do
	case "$1" in
	--reps)
		reps=${2-}
		case "$reps" in
		'' | *[!0-9]* | 0)
			echo "plots.sh: --reps needs a count (try --help)" >&2
			exit 2 ;;
		esac
		shift ;;
	--redraw) redraw=1 ;;
	cost|batches|buffersize|threads) plots="$plots $1" ;;
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "plots.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$plots" ] || plots="cost batches buffersize threads"
cd "$(dirname "$0")/.."

out=bench-results
img=docs/img
mkdir -p "$out" "$img"

if [ "$redraw" = 0 ]; then
	# oneTBB is optional: without libtbb-dev its line is left out.
	tools/deps.sh gcc g++ meson ninja-build pkg-config libck-dev \
		libtbb-dev gnuplot-nox
	if [ -d build-release ]; then
		meson setup --reconfigure build-release --buildtype=release \
			-Dtests=disabled >/dev/null
	else
		meson setup build-release --buildtype=release \
			-Dtests=disabled >/dev/null
	fi
	ninja -C build-release >/dev/null
else
	tools/deps.sh gnuplot-nox
fi
bin=build-release/bench

# The machine, in words, for every plot's footnote.
cores=$(nproc)
model=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -n 1 |
	sed 's/(R)//g; s/(TM)//g; s/ Processor//; s/ CPU//; s/  */ /g')
mem_gib=$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
vm=""
grep -qw hypervisor /proc/cpuinfo && vm=", virtual machine"
machine="$cores cores ($model$vm), $mem_gib GiB"
load() { cut -d' ' -f1 /proc/loadavg; }

# Busy CPU ticks of the whole machine (user, nice, system, irq, softirq,
# steal), and those of this script's finished children: the difference
# is what other programs used while a plot's benchmarks ran.
busy_ticks() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}
own_ticks() { awk '{ print $16 + $17 }' "/proc/$$/stat"; }

# begin NAME / end NAME: the note of plot NAME, in
# bench-results/plots-NAME.note: the machine, the load average when its
# runs began (which counts every runnable thread, so it is read before
# the benchmark's own), and the cores other programs used meanwhile.
begin() {
	echo "plots.sh: $1 ($(($(date +%s) - start)) s)" >&2
	load_before=$(load)
	busy0=$(busy_ticks)
	own0=$(own_ticks)
	t0=$(date +%s.%N)
}
end() {
	others=$(awk -v b0="$busy0" -v b1="$(busy_ticks)" -v o0="$own0" \
		-v o1="$(own_ticks)" -v t0="$t0" -v t1="$(date +%s.%N)" \
		-v hz="$(getconf CLK_TCK)" 'BEGIN {
			c = ((b1 - b0) - (o1 - o0)) / hz / (t1 - t0)
			printf "%.1f", c < 0 ? 0 : c }')
	echo "$machine; other programs used $others of its $cores cores" \
		"meanwhile (load average $load_before before);" \
		"$(date -u '+%Y-%m-%d %H:%M UTC')" >"$out/plots-$1.note"
}

# The cost plot's runs: every loader at P = 16 on getobs that sleep 10 us
# to 10 ms; n gives about 0.2 s of sleeping at each cost. The reference,
# 16 plain threads calling the same getobs with no hand-off, runs before
# and after the loaders at each cost; every row gets the mean of its two
# times as bare_ms. One thread alone runs n / 16 (peer "bare", P = 1).
run_cost() {
	csv="$out/plots-cost.csv"
	rows="$out/plots-cost.tmp"
	echo "peer,variant,case,t_us,P,n,batch,ordered,reps,median_ms,min_ms,max_ms,note,bare_ms" >"$csv"
	loaders="$bin/peers/peer_eachobs $bin/peers/peer_handpool"
	if [ -x "$bin/peers/peer_tbb" ]; then
		loaders="$loaders $bin/peers/peer_tbb"
	else
		echo "plots.sh: oneTBB not built (libtbb-dev missing): its" \
			"line is left out" >&2
	fi
	for t in 10 100 1000 10000; do
		case $t in
		10) n=32000 ;; 100) n=16000 ;; 1000) n=3200 ;; *) n=320 ;;
		esac
		bare="$bin/peers/peer_bare --case sleep --t-us $t --reps $reps"
		$bare --n "$n" --threads 16 >"$rows"
		$bare --n $((n / 16)) --threads 1 >>"$rows"
		for l in $loaders; do
			"$l" --case sleep --t-us "$t" --n "$n" --threads 16 \
				--reps "$reps" >>"$rows"
		done
		$bare --n "$n" --threads 16 >>"$rows"
		bare_ms=$(awk -F, '$1 == "bare" && $5 == 16 { s += $10; k++ }
			END { printf "%.3f", s / k }' "$rows")
		# The second reference row is folded into the first.
		awk -F, -v b="$bare_ms" '!($1 == "bare" && $5 == 16 && seen++) {
			print $0 "," b }' "$rows" >>"$csv"
	done
	rm -f "$rows"
}

run_batches() {
	"$bin/batches" --cases 64B,1KiB,4KiB,64KiB,602KiB --reps "$reps" \
		--csv "$out/plots-batches.csv" >/dev/null
}

run_buffersize() {
	"$bin/buffersize" --reps "$reps" --csv "$out/plots-buffersize.csv" \
		>/dev/null
}

# n = 1000 at 1 ms (--quick): 16 rounds at 64 threads, 1 s at one.
run_threads() {
	for w in sleep cpu; do
		"$bin/timedataset" --work "$w" --cases 1ms --quick --ordered no \
			--threads 1,2,4,8,16,32,64 --reps "$reps" \
			--csv "$out/plots-threads-$w.csv" >/dev/null
	done
}

start=$(date +%s)
for plot in $plots; do
	if [ "$redraw" = 0 ]; then
		begin "$plot"
		"run_$plot"
		end "$plot"
	fi
	if [ ! -f "$out/plots-$plot.note" ]; then
		echo "plots.sh: no results for $plot in $out: run without" \
			"--redraw" >&2
		exit 1
	fi
	gnuplot -e "dir='$out'; img='$img'" "bench/plots/$plot.gp"
	echo "plots.sh: wrote $img/plot-$plot.png" >&2
done
echo "plots.sh: done in $(($(date +%s) - start)) s" >&2

#!/bin/sh
# The test suite, as CI runs it, from a fresh Debian 12 machine:
# installs what is missing, then builds and runs `meson test` three times:
#   build-test  warnings as errors; unit (Criterion), autotune (the
#               contract suites again, every iterator autotuned), stress
#               and image suites (image: bench/imagefolder.c --check on 200
#               generated JPEGs and examples/imagefolder.c on the same,
#               a few seconds beside the others)
#   build-asan  AddressSanitizer + UndefinedBehaviorSanitizer, unit and stress
#   build-tsan  ThreadSanitizer over the plain-main stress programs
#               (Criterion does not run under TSan; see docs/testing.md)
# then the 120 s soak of stress_iter (suite soak, a new seed each run) in
# build-test and build-tsan at the same time, and a 60 s fuzz run
# (tools/fuzz.sh: libFuzzer, clang, ASan+UBSan) that counts as one more
# test, and the MPI shards example with 4 ranks (tools/mpi_example.sh),
# one more. Before that window, the Python package's pytest suite, plain
# and under ASan (tools/python_test.sh). About 20 minutes on 2 cores.
# Beside the soaks, the unit suite runs once more under valgrind memcheck
# (`meson test --setup=valgrind` in build-test, about 3 minutes alone).
# The last line is "N passed, M failed", summed from meson's own summaries.
#
# Usage: tools/test.sh [--help]
set -u
if [ $# -gt 0 ]; then
	case "$1" in
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
fi
cd "$(dirname "$0")/.."
# Everything up front: the fuzz and MPI scripts install what they need
# too, but they run side by side below, and two apt-gets at once fight
# over dpkg's lock.
tools/deps.sh gcc meson ninja-build pkg-config libck-dev libcriterion-dev \
	valgrind clang libclang-rt-14-dev libopenmpi-dev openmpi-bin \
	libturbojpeg0-dev libarchive-dev libdlpack-dev libtorch-dev libopenblas0 \
	zlib1g-dev \
	dataset-fashion-mnist python3-dev python3-pip python3-mesonpy \
	python3-numpy python3-pytest python3-torch python3-numba || exit 1

rm -f build-test.valgrind.log build-fuzz.rc build-mpi.rc
passed=0
failed=0
status=0
built=""

# run_pass DIR SETUP-ARGS -- TEST-ARGS
run_pass() {
	dir=$1
	shift
	setup=""
	while [ "$1" != "--" ]; do setup="$setup $1"; shift; done
	shift
	echo "=== $dir:$setup"
	# shellcheck disable=SC2086
	if ! meson setup --wipe "$dir" $setup >"$dir.setup.log" 2>&1 &&
	   ! meson setup "$dir" $setup >"$dir.setup.log" 2>&1; then
		cat "$dir.setup.log"
		failed=$((failed + 1)); status=1; return
	fi
	if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
		tail -50 "$dir.build.log"
		failed=$((failed + 1)); status=1; return
	fi
	built="$built $dir"
	meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$dir.test.log"
	count "$dir.test.log"
}

# count LOG: add a meson test log's summary to the totals.
count() {
	ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$1")
	# A broken variant that its suite caught is a pass.
	xfail=$(sed -n 's/^Expected Fail: *\([0-9]*\).*/\1/p' "$1")
	ok=${ok:+$((ok + ${xfail:-0}))}
	bad=0
	for k in "Fail" "Unexpected Pass" "Timeout"; do
		v=$(sed -n "s/^$k: *\([0-9]*\).*/\1/p" "$1")
		bad=$((bad + ${v:-0}))
	done
	if [ -z "$ok" ]; then
		echo "no meson summary in $1" >&2
		bad=$((bad + 1))
	fi
	passed=$((passed + ${ok:-0}))
	failed=$((failed + bad))
	[ "$bad" -eq 0 ] || status=1
}

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/test/tsan.supp"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/test/lsan.supp print_suppressions=0"

# The image suite runs here, not in the window at the end: its few seconds
# of decoding overlap the unit and stress tests (meson runs two at once),
# where the window's valgrind run is the longest and would only get later.
run_pass build-test -Dwerror=true -Dtests=enabled -- --suite unit --suite autotune \
	--suite stress --suite image
# The sanitizer builds run no benchmark, so they build none (bench/peers
# compiles libtorch and oneTBB peers in C++); build-test still compiles
# them with warnings as errors.
run_pass build-asan -Dtests=enabled -Dbenchmarks=disabled \
	-Db_sanitize=address,undefined -Dc_args=-fno-sanitize-recover=all \
	-Dcpp_args=-fno-sanitize-recover=all \
	-Db_lundef=false -- --suite unit --suite stress
run_pass build-tsan -Dtests=enabled -Dbenchmarks=disabled \
	-Db_sanitize=thread -Db_lundef=false -- --suite stress

# The Python package (tools/python_test.sh): built with pip as a user
# builds it, its pytest suite plain and under ASan + UBSan; each test
# pytest ran counts.
tools/python_test.sh >build-python.log 2>&1
py_rc=$?
grep -E "^=== python|^SKIPPED|passed|failed|^(FAILED|ERROR) " build-python.log
# pytest's summary lines: "3 failed, 349 passed, 7 skipped in 40.1s".
summaries=$(grep -E "^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s" build-python.log)
for n in $(echo "$summaries" | grep -oE "[0-9]+ passed" | cut -d' ' -f1); do
	passed=$((passed + n))
done
for n in $(echo "$summaries" | grep -oE "[0-9]+ (failed|errors?)" |
	cut -d' ' -f1); do
	failed=$((failed + n))
done
if [ "$py_rc" -ne 0 ]; then
	status=1
	grep -qE "[0-9]+ (failed|error)" build-python.log ||
		failed=$((failed + 1))
	tail -60 build-python.log
fi

# One window for the rest: the unit suite under valgrind memcheck (about 3
# minutes alone, the longest), and beside it, at a lower priority, what is
# bounded by time (the plain and TSan soaks, 120 s each; the 60 s fuzz run)
# or short (the MPI example: 4 ranks, each loading its shard). The soaks
# and the fuzzer then check less in the same time, instead of making the
# suite longer.
echo "=== soak:$built, valgrind, fuzz, mpi"
for dir in $built; do
	[ "$dir" = build-asan ] && continue
	nice -n 10 meson test -C "$dir" --no-rebuild --print-errorlogs \
		--suite soak >"$dir.soak.log" 2>&1 &
done
# Its own test log (testlog-valgrind.txt), so it can share build-test.
case " $built " in
*" build-test "*)
	meson test -C build-test --no-rebuild --print-errorlogs \
		--setup=valgrind >build-test.valgrind.log 2>&1 &
	;;
esac
(nice -n 10 tools/fuzz.sh 60 >build-fuzz.log 2>&1; echo $? >build-fuzz.rc) &
(nice -n 10 tools/mpi_example.sh >build-mpi.log 2>&1; echo $? >build-mpi.rc) &
wait
for dir in $built; do
	[ "$dir" = build-asan ] && continue
	# meson shows a passing test's output only in its own log.
	grep -h "soak_iter" "$dir.soak.log"
	grep -h "^stress_iter:" "$dir/meson-logs/testlog.txt"
	grep -q "^Ok: *1" "$dir.soak.log" || tail -40 "$dir.soak.log"
	count "$dir.soak.log"
done
if [ -e build-test.valgrind.log ]; then
	echo "=== valgrind"
	grep -E "^ *[0-9]+/[0-9]+ " build-test.valgrind.log
	# A failing test's own output (meson's error logs, memcheck's report).
	if ! grep -q "^Fail: *0" build-test.valgrind.log; then
		grep -vE "^ *[0-9]+/[0-9]+ .* OK " build-test.valgrind.log |
			tail -200
	fi
	count build-test.valgrind.log
fi
# pass_if NAME LOG RCFILE PATTERN: one counted test from a script's status.
pass_if() {
	echo "=== $1"
	if [ "$(cat "$3" 2>/dev/null)" = 0 ]; then
		grep -E "$4" "$2"
		passed=$((passed + 1))
	else
		tail -60 "$2"
		failed=$((failed + 1)); status=1
	fi
}
pass_if "fuzz: tools/fuzz.sh 60" build-fuzz.log build-fuzz.rc '^(Done|stat::)'
# The MPI shards example (docs/distributed.md): counts as one test.
pass_if "mpi: tools/mpi_example.sh" build-mpi.log build-mpi.rc 'epoch|OK'
echo "$passed passed, $failed failed"
exit $status

#!/bin/sh
# The exe_wrapper of `meson test --setup=valgrind`: runs one test under
# valgrind memcheck, following every child process, and fails if any
# process reported an error.
#
# usage: memcheck.sh [VALGRIND-OPTION...] PROGRAM [ARG...]
#
# Why not plain valgrind: Criterion runs each test in a child process that it
# forks and re-executes, so without --trace-children=yes memcheck sees only
# the runner and never eachobs. With it, memcheck does check the children,
# but a child's --error-exitcode is lost: Criterion reports a test by what the
# child said over its protocol, not by how it exited, so a test that leaked
# still counts as passing and the run exits 0. Each process therefore logs to
# its own file, and this script fails the test unless every log ends with
# "ERROR SUMMARY: 0 errors".
# On a loaded machine Criterion rarely (seen once in thousands of test
# processes) loses one before it starts (it reports "exited during its
# setup or teardown", and every test that started passed). Such a run is
# repeated once, saying so, and must then pass whole: every test, every
# log clean. A test that failed, or the same loss twice, fails.
set -u
# Tests whose assertions need the machine's own speed (which direction
# autotune moves in) still run, for memcheck's sake, but skip those.
export EACHOBS_TEST_MEMCHECK=1
logs=$(mktemp -d "${TMPDIR:-/tmp}/memcheck.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT

# Run once: 0 when the test passed and every log is clean, 1 when memcheck
# found an error (or a log has no summary), else the program's status.
# Logs of bad processes and the program's stderr go to stderr.
attempt() {
	rm -f "$logs"/*.log
	# The program's stderr is shown as it comes (a test that hangs until
	# meson's timeout still shows it) and kept to be read afterwards.
	{ {
		valgrind --trace-children=yes --log-file="$logs/%p.log" "$@" \
			2>&1 1>&3 3>&-
		echo $? >"$logs/rc"
	} | tee "$logs/stderr" >&2; } 3>&1
	rc=$(cat "$logs/rc")
	for f in "$logs"/*.log; do
		[ -e "$f" ] || continue
		if grep -q "ERROR SUMMARY: [1-9]" "$f" ||
			! grep -q "ERROR SUMMARY:" "$f"; then
			echo "--- memcheck: $(basename "$f" .log) ---" >&2
			cat "$f" >&2
			[ "$rc" -eq 0 ] && rc=1
		fi
	done
	return "$rc"
}

# Criterion lost a test process before it started: the warning, and no
# test failed. A crash there is not retried: a loader thread still
# running after the test's body would crash there too. (The lost process may itself show memcheck errors: Criterion
# leaves its own allocations behind when a process ends that early.)
lost_before_start() {
	grep -q "exited during its setup or teardown" \
		"$logs/stderr" && ! grep -q "\[FAIL\]" "$logs/stderr"
}

attempt "$@" && exit 0
rc=$?
lost_before_start || exit "$rc"
echo "memcheck.sh: Criterion lost a test process before it started" \
	"(every test that ran passed); running once more" >&2
attempt "$@"

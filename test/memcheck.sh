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
set -u
logs=$(mktemp -d "${TMPDIR:-/tmp}/memcheck.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT
valgrind --trace-children=yes --log-file="$logs/%p.log" "$@"
rc=$?
bad=0
for f in "$logs"/*.log; do
	[ -e "$f" ] || continue
	if grep -q "ERROR SUMMARY: [1-9]" "$f" || ! grep -q "ERROR SUMMARY:" "$f"; then
		echo "--- memcheck: $(basename "$f" .log) ---" >&2
		cat "$f" >&2
		bad=1
	fi
done
[ "$rc" -ne 0 ] && exit "$rc"
exit "$bad"

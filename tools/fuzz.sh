#!/bin/sh
# Fuzz eachobs with libFuzzer: test/fuzz_iter.c, built with clang and
# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included),
# runs for SECONDS (default 60) and exits non-zero on the first failure.
#
# Usage: tools/fuzz.sh [--help] [SECONDS]
#
# The corpus is kept in fuzz-corpus/ (not in git) and grows from run to run;
# a failing input is written to build-fuzz/ and replays with
# `build-fuzz/fuzz_iter build-fuzz/crash-...`.
set -eu
seconds=${1-60}
case "$seconds" in
-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
'' | *[!0-9]*)
	echo "fuzz.sh: '$seconds' is not a number of seconds (try --help)" >&2
	exit 2 ;;
esac
if [ $# -gt 1 ]; then
	echo "fuzz.sh: unexpected argument '$2' (try --help)" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
tools/deps.sh clang libclang-rt-14-dev libck-dev

mkdir -p build-fuzz fuzz-corpus
# The library's sources are compiled in directly: the harness needs them
# instrumented for coverage and sanitizers, unlike the meson builds.
# shellcheck disable=SC2046
clang -std=c11 -g -O1 -DEACHOBS_BUILDING \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Iinclude -Isrc test/fuzz_iter.c $(ls src/*.c) \
	-lck -lpthread -o build-fuzz/fuzz_iter

# -timeout: an input that runs 20 s is a hang (each takes milliseconds).
# -len_control=0 -max_len=512: the options, the failures and then the
# release schedule take 30 bytes and more; growing inputs from a few bytes,
# as libFuzzer does by default, left failures, samplers and pools untried
# for most of a one-minute run.
# -rss_limit_mb / -malloc_limit_mb: the memory bound is part of the
# contract; an input that needs more is a failure.
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1"
exec build-fuzz/fuzz_iter -max_total_time="$seconds" -timeout=20 \
	-len_control=0 -max_len=512 \
	-rss_limit_mb=1024 -malloc_limit_mb=512 -print_final_stats=1 \
	-artifact_prefix=build-fuzz/ fuzz-corpus

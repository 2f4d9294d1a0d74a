#!/bin/sh
# The Python package's tests, as tools/test.sh runs them: installs what is
# missing, builds the package the way a user does (pip install
# --no-build-isolation --target DIR .) and runs pytest over test/python;
# then the same with the package (and so the C library in it) built with
# AddressSanitizer + UndefinedBehaviorSanitizer, run under the sanitizers'
# preloaded runtimes. A test whose optional package (torch, numba) is
# missing is skipped, and pytest names the package (-rs).
# The last line of each pass is pytest's summary ("N passed, ...").
#
# Usage: tools/python_test.sh [--help] [--no-asan] [PYTEST-ARGS...]
set -u
asan=1
case "${1-}" in
-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
--no-asan) asan=0; shift ;;
esac
cd "$(dirname "$0")/.."
tools/deps.sh gcc meson ninja-build pkg-config libck-dev libdlpack-dev \
	python3-dev python3-pip python3-mesonpy python3-numpy python3-pytest \
	python3-torch python3-numba || exit 1
# Debian's interpreter, the one its python3-* packages are for, whatever
# else is first on PATH.
py=/usr/bin/python3
status=0

# pass DIR BUILD-ENV RUN-ENV [PIP-ARGS]: build into DIR/site with the
# environment BUILD-ENV (NAME=VALUE words) and PIP-ARGS, test with RUN-ENV.
pass() {
	dir=$1
	echo "=== python: $dir"
	rm -rf "$dir"
	mkdir -p "$dir"
	# shellcheck disable=SC2086
	if ! env $2 $py -m pip install --no-build-isolation --no-deps \
		${4-} --target "$dir/site" . >"$dir/pip.log" 2>&1; then
		tail -40 "$dir/pip.log"
		echo "0 passed, 1 failed"
		status=1
		return
	fi
	# shellcheck disable=SC2086
	(cd test/python && env PYTHONPATH="$PWD/../../$dir/site" $3 \
		$py -m pytest -q -rs -p no:cacheprovider $pytest_args) \
		>"$dir/pytest.log" 2>&1
	tail -25 "$dir/pytest.log"
	tail -1 "$dir/pytest.log" | grep -q " passed" &&
		! tail -1 "$dir/pytest.log" | grep -qE " (failed|error)" ||
		status=1
}
pytest_args="$*"
pass build-py "" ""
if [ "$asan" = 1 ]; then
	# Python's own allocations are not checked for leaks (it frees
	# little at exit); every access of ours is.
	pass build-py-asan "CFLAGS=-fno-sanitize-recover=all" \
		"LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1" \
		"--config-settings=setup-args=-Db_sanitize=address,undefined"
fi
exit $status

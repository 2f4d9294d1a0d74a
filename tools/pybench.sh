#!/bin/sh
# The Python benchmarks (bench/python/README.md): eachobs's DataLoader
# against PyTorch's, on Debian's Python (python3-torch, python3-numba,
# python3-torchvision). Installs the package from this tree into
# build-pybench/site (pip --no-build-isolation) unless --no-install; when
# the system's BLAS is the reference one (netlib), runs torch on OpenBLAS
# instead: the installed libopenblas0-pthread, or that package unpacked
# into build-pybench/openblas (apt-get download, nothing installed). Then
# runs each program in turn; fashion_mnist.py with --native.
#
# Usage: tools/pybench.sh [--help] [--quick] [--no-install] [PROGRAM]...
#   PROGRAM: inmemory overhead fashion_mnist jpeg numba_scaling (all by
#   default, in that order); --quick runs each for about 10 s.
#   PYTHON (default /usr/bin/python3) names the interpreter.
set -eu
quick= install=1 programs=
for arg; do
	case "$arg" in
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	--quick) quick=--quick ;;
	--no-install) install= ;;
	inmemory|overhead|fashion_mnist|jpeg|numba_scaling)
		programs="$programs $arg" ;;
	*) echo "pybench.sh: unknown argument $arg (--help)" >&2; exit 2 ;;
	esac
done
: "${programs:=inmemory overhead fashion_mnist jpeg numba_scaling}"
PY=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."
out=build-pybench
mkdir -p "$out"

if [ -n "$install" ]; then
	echo "# installing eachobs from $(pwd) into $out/site" >&2
	rm -rf "$out/site"
	"$PY" -m pip install --quiet --no-build-isolation --target "$out/site" \
		. >"$out/pip.log" 2>&1 || {
		tail -20 "$out/pip.log" >&2
		echo "pybench.sh: pip install failed ($out/pip.log)" >&2
		exit 1
	}
fi
# --no-install: the package installed by an earlier run, if there is one.
if [ -d "$out/site/eachobs" ]; then
	PYTHONPATH="$(pwd)/$out/site${PYTHONPATH:+:$PYTHONPATH}"
	export PYTHONPATH
fi

blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || :)
case "$blas" in
*/blas/*)
	sys=/usr/lib/x86_64-linux-gnu/openblas-pthread
	ours="$out/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread"
	if [ ! -e "$sys/libblas.so.3" ] && [ ! -e "$ours/libblas.so.3" ]; then
		echo "# the reference BLAS: unpacking libopenblas0-pthread" >&2
		(cd "$out" && rm -f libopenblas0-pthread_*.deb &&
			apt-get download libopenblas0-pthread >/dev/null 2>&1 &&
			dpkg -x libopenblas0-pthread_*.deb openblas) ||
			echo "# cannot fetch OpenBLAS: torch stays on $blas" >&2
	fi
	for d in "$sys" "$(pwd)/$ours"; do
		if [ -e "$d/libblas.so.3" ]; then
			LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
			export LD_LIBRARY_PATH
			break
		fi
	done ;;
esac

status=0
for p in $programs; do
	extra=
	[ "$p" = fashion_mnist ] && extra=--native
	echo
	echo "## bench/python/$p.py $quick $extra"
	"$PY" "bench/python/$p.py" $quick $extra || status=1
done
exit $status

#!/bin/sh
# The image pipeline of docs/imagefolder.md, from a fresh Debian 12
# machine: installs what is missing (libturbojpeg, and Debian's PyTorch,
# PIL and torchvision for the PyTorch row), builds optimized, and runs
# bench/imagefolder.c, the benchmark of examples/imagefolder.c.
#
# Usage: tools/imagefolder.sh [--help] [FOLDER] [OPTION]...
# The arguments go to the benchmark (build-release/bench/bench_imagefolder
# --help lists them); without any it generates 2,000 JPEGs once and
# trains a 40 ms step; e.g. --step-us 0, --images 400, --epochs 2,
# --no-torch.
set -eu
# --help anywhere: the other arguments are the benchmark's, but this usage
# comes before anything is installed.
for arg; do
	case "$arg" in
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	esac
done
cd "$(dirname "$0")/.."
tools/deps.sh gcc meson ninja-build pkg-config libck-dev libturbojpeg0-dev \
	python3-torch python3-pil python3-torchvision
if [ -d build-release ]; then
	meson setup --reconfigure build-release -Dbuildtype=release >/dev/null
else
	meson setup build-release -Dbuildtype=release >/dev/null
fi
ninja -C build-release bench/bench_imagefolder >/dev/null
[ $# -gt 0 ] || set -- --step-us 40000
exec ./build-release/bench/bench_imagefolder "$@"

#!/bin/sh
# Carry the CuTe DSL (and QuACK) to a GPU host that has no index to install from, in pieces of
# at most ~35 MB (issue 15; docs/benchmarks.md, "Two back ends on the H200").
#
#   sh scripts/cute_wheels.sh pack [DIR]      # here: cp312 wheels into DIR/a and DIR/b (.whl)
#   sh scripts/cute_wheels.sh park [DIR]      # there, first call: keep DIR/a's half under /tmp
#   sh scripts/cute_wheels.sh install [DIR]   # there, next call: join, install into /tmp/site
#   export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
#
# The DSL's cu12 library wheel is 92 MB; its files packed as one tar.xz are 63 MB, split in two
# halves that travel in two calls. The small wheels (the DSL's other parts, QuACK, tvm-ffi) go
# with the second half. Versions are the pins of requirements.txt and workers/catalog/peers.
set -eu
mode=${1:?pack, park or install}
dir=${2:-.whl}
dsl=4.8.1
case "$mode" in
pack)
    mkdir -p "$dir/a" "$dir/b" "$dir/tmp"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
        -d "$dir/tmp" "nvidia-cutlass-dsl==$dsl" "nvidia-cutlass-dsl-libs-base==$dsl" \
        "nvidia-cutlass-dsl-libs-core==$dsl" "nvidia-cutlass-dsl-libs-cu12==$dsl" \
        quack-kernels==0.6.5 apache-tvm-ffi==0.1.15.post2
    rm -rf "$dir/tmp/cu12" && mkdir "$dir/tmp/cu12"
    (cd "$dir/tmp/cu12" && unzip -q ../nvidia_cutlass_dsl_libs_cu12-*.whl)
    tar -C "$dir/tmp/cu12" -cf - . | xz -T0 -9 > "$dir/tmp/cu12.tar.xz"
    (cd "$dir/tmp" && md5sum cu12.tar.xz > ../b/cu12.md5)
    split -n 2 -d "$dir/tmp/cu12.tar.xz" "$dir/tmp/cu12part"
    mv "$dir/tmp/cu12part00" "$dir/a/" && mv "$dir/tmp/cu12part01" "$dir/b/"
    find "$dir/tmp" -maxdepth 1 -name '*.whl' ! -name '*libs_cu12*' -exec mv {} "$dir/b/" \;
    rm -rf "$dir/tmp"
    du -sh "$dir/a" "$dir/b"
    ;;
park)
    cp "$dir/a/cu12part00" /tmp/
    ;;
install)
    cat /tmp/cu12part00 "$dir/b/cu12part01" > /tmp/cu12.tar.xz
    echo "$(cut -d' ' -f1 "$dir/b/cu12.md5")  /tmp/cu12.tar.xz" | md5sum -c
    mkdir -p /tmp/site
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site "$dir"/b/*.whl
    tar -C /tmp/site -xJf /tmp/cu12.tar.xz
    rm /tmp/cu12.tar.xz
    ;;
*)
    echo "usage: $0 pack|park|install [DIR]" >&2
    exit 2
    ;;
esac

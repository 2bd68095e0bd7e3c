#!/bin/bash
# KernelBench level 1 on the lent GPU host, a range of problems per device call (a call has a
# time limit), the results under $OUT; join the parts with bench_kernelbench.py --merge.
#
#   bash scripts/bench_kernelbench_device.sh FIRST LAST TAG [extra bench_kernelbench.py args]
#   BENCH_S=400 JOBS=8 ONLY_RE='^(5|12)_' bash scripts/bench_kernelbench_device.sh 1 100 c
#   KB_DIR=.bench/mine bash scripts/bench_kernelbench_device.sh 1 100 mine  # other problems
#   # with the per-case tuner (the CLI's default): its time counts in the campaign's wall, and
#   # each problem's limit grows by 100 s a job (the tuners take turns on the GPU)
#   BENCH_S=280 JOBS=2 ONLY_RE='^(34|98)_' bash scripts/bench_kernelbench_device.sh 34 98 t \
#     --candidates 4 --tune --wall-s 250
#
# Expects, carried with the working tree: the level-1 files in .bench/kb (read from a local
# KernelBench copy, never committed) and Debian's bubblewrap unpacked in .debs/x (the host has
# none: apt-get download bubblewrap && dpkg -x bubblewrap*.deb .debs/x). BENCH_S bounds the
# whole run (the rows written before it stop are kept), JOBS runs problems at once.
set -u
export KERNELEVOLVE_BWRAP=$PWD/.debs/x/usr/bin/bwrap PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
FIRST=$1; LAST=$2; TAG=$3; shift 3
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  > "$OUT/fingerprint-$TAG.txt"
python -c "import torch, triton, sys; print(torch.__version__, torch.version.cuda, \
triton.__version__, sys.version.split()[0])" >> "$OUT/fingerprint-$TAG.txt"
KB_DIR=${KB_DIR:-.bench/kb}
ONLY=$(ls "$KB_DIR" | awk -F_ -v a="$FIRST" -v b="$LAST" '$1+0>=a && $1+0<=b' \
  | grep -E "${ONLY_RE:-.}" | sort -t_ -k1,1n | paste -sd,)
timeout "${BENCH_S:-560}" python scripts/bench_kernelbench.py --dir "$KB_DIR" --platform cuda \
  --only "$ONLY" --candidates 3 --trials 1 --wall-s 150 --time-limit-s 120 \
  --max-elements 4194304 --jobs "${JOBS:-8}" --out "$OUT/kb1-$TAG.json" "$@" 2>&1 | tail -80

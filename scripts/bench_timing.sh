#!/bin/sh
# Issue 10 on a GPU host: each catalog kernel evaluated in N fresh processes with the paired,
# graph-replay performance gate; results as JSON under $OUT (or ./bench-out). Usage:
#   sh scripts/bench_timing.sh N KERNEL...   (KERNEL: problem name; its candidate is
#   $BENCH_DIR/KERNEL.py, else docs/peers/KERNEL_tuned_h200.py, else docs/peers/KERNEL_best_h200.py)
set -u
N=${1:-5}; shift
OUT=${OUT:-bench-out}; BENCH_DIR=${BENCH_DIR:-.bench}
mkdir -p "$OUT"
for k in "$@"; do
  cand="$BENCH_DIR/$k.py"
  [ -f "$cand" ] || cand="docs/peers/${k}_tuned_h200.py"
  [ -f "$cand" ] || cand="docs/peers/${k}_best_h200.py"
  python3 -m workers remeasure --problem "workers/catalog/problems/$k.py" \
    --workload "workers/catalog/problems/$k.json" --candidate "$cand" --platform cuda \
    --baseline compile -n "$N" --json > "$OUT/remeasure-$k.json" 2> "$OUT/remeasure-$k.err"
  echo "$k rc=$? $(python3 -c "import json,sys; d=json.load(open('$OUT/remeasure-$k.json'))['comparison']; print('same_verdict', d['same_verdict'], 'case_agreement', d['case_agreement'], [r['verdict'] for r in json.load(open('$OUT/remeasure-$k.json'))['runs']])" 2>&1 | tail -1)"
done

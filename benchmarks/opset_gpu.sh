#!/usr/bin/env bash
# Issue 13's GPU proof: the new op families (norm backward, pooling, block-scale quantization, MoE
# grouped matmul) on cudnn and torch, every output validated against the float64 reference, small
# samples and LLM/ResNet perf shapes alike, plus the upstream hipDNN samples given as extra paths.
#
#   benchmarks/opset_gpu.sh RESULTS_DIR [EXTRA_GRAPH_PATHS...]
#
# Each step's console output goes to RESULTS_DIR/<step>.log as it runs (a step cut short still
# leaves its log); RESULTS_DIR/opset-results.tar.gz holds summary/validation tables and run.json.
set -u
out=${1:?results folder}; shift
runs=${RUNS_DIR:-$(mktemp -d)}
mkdir -p "$out"
small="graphs/norm graphs/pool graphs/blockscale graphs/moe"
perf="graphs/perf/norm graphs/perf/pool graphs/perf/blockscale graphs/perf/moe"
step() {   # step NAME SECONDS ARGS...
  local name=$1 limit=$2; shift 2
  timeout -s INT "$limit" python3 -m hipdnn_trace run "$@" --out "$runs" --run-id "$name" --progress off \
    --no-trace --format csv --graph-timeout 150 > "$out/$name.log" 2>&1
  echo "$name: exit $? ($(tail -1 "$out/$name.log"))"
}
for backend in cudnn torch; do
  # shellcheck disable=SC2086
  step "small-$backend" 150 $small "$@" --backend "$backend" -w 3 -i 20
done
for backend in cudnn torch; do
  # shellcheck disable=SC2086
  step "perf-$backend" 200 $perf --backend "$backend" -w 3 -i 20
done
tar czf "$out/opset-results.tar.gz" -C "$runs" --exclude='*.parquet' --exclude='*.pftrace' .

#!/usr/bin/env bash
# Issue 12's GPU proof in one command: the attention samples and the upstream hipDNN SDPA files on
# cudnn and torch, every output validated against the float64 reference, then the perf attention
# graphs on cudnn and on torch's flash kernels, tabulated as TFLOPS and % of the dense peak.
#
#   benchmarks/attention_gpu.sh RESULTS_DIR [UPSTREAM_GRAPH_DIR] [PEAK_TFLOPS]
#
# Writes RESULTS_DIR/attention-results.tar.gz (summary/validation/mismatch tables and run.json of
# each run, no per-iteration frames) and RESULTS_DIR/tflops.md. docs/benchmarks.md has the results.
set -u
out=${1:?results folder}; upstream=${2:-}; peak=${3:-989}
runs=$(mktemp -d)
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$runs/gpu.csv" 2>&1
step() { echo "== $*"; timeout 420 python3 -m hipdnn_trace run "$@" --out "$runs" --progress off --no-trace \
  --format csv; echo "   exit $?"; }
step graphs/attention $upstream --backend cudnn -w 3 -i 20 --run-id cudnn-samples -q
step graphs/attention $upstream --backend torch -w 3 -i 20 --run-id torch-samples -q
step graphs/perf/attention --backend cudnn -w 10 -i 50 --run-id perf-cudnn -q
step graphs/perf/attention --backend torch --torch-sdpa-backend flash -w 10 -i 50 --run-id perf-torch-flash -q
step graphs/perf/attention --backend torch -w 10 -i 50 --run-id perf-torch-default -q --validate none
python3 benchmarks/attention_tflops.py "$runs/perf-cudnn" "$runs/perf-torch-flash" "$runs/perf-torch-default" \
  --peak "$peak" | tee "$out/tflops.md"
tar czf "$out/attention-results.tar.gz" -C "$runs" --exclude='*.parquet' --exclude='*.pftrace' .

#!/usr/bin/env bash
# Issue 12's GPU proof: the attention samples and the upstream hipDNN SDPA files on cudnn and torch,
# every output validated against the float64 reference, then the perf attention graphs on cudnn and
# on torch's flash kernels, tabulated as TFLOPS and % of the dense peak.
#
#   benchmarks/attention_gpu.sh RESULTS_DIR [UPSTREAM_GRAPH_DIR] [PEAK_TFLOPS]
#
# Each step's console output goes to RESULTS_DIR/<step>.log as it runs (a step cut short still
# leaves its log); RESULTS_DIR/tflops.md holds the table and attention-results.tar.gz the summary,
# validation and mismatch tables with run.json of every run. docs/benchmarks.md has the results.
set -u
out=${1:?results folder}; upstream=${2:-}; peak=${3:-989}
runs=${RUNS_DIR:-$(mktemp -d)}
mkdir -p "$out"
step() {   # step NAME SECONDS ARGS...
  local name=$1 limit=$2; shift 2
  timeout -s INT "$limit" python3 -m hipdnn_trace run "$@" --out "$runs" --run-id "$name" --progress off \
    --no-trace --format csv --graph-timeout 120 > "$out/$name.log" 2>&1
  echo "$name: exit $? ($(tail -1 "$out/$name.log"))"
}
step cudnn-samples 150 graphs/attention ${upstream:+$upstream} --backend cudnn -w 3 -i 20
step torch-samples 150 graphs/attention ${upstream:+$upstream} --backend torch -w 3 -i 20
step perf-cudnn 170 graphs/perf/attention --backend cudnn -w 5 -i 30
step perf-torch-flash 120 graphs/perf/attention --backend torch --torch-sdpa-backend flash -w 5 -i 30 --validate none
python3 benchmarks/attention_tflops.py "$runs/perf-cudnn" "$runs/perf-torch-flash" --peak "$peak" > "$out/tflops.md"
tar czf "$out/attention-results.tar.gz" -C "$runs" --exclude='*.parquet' --exclude='*.pftrace' .

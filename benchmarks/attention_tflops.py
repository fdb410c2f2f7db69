"""A TFLOPS table for attention graphs from run directories: one column per run, % of peak.

Run the perf attention graphs once per configuration with the real CLI, then tabulate:

    hipdnn-trace run graphs/perf/attention --backend cudnn -w 10 -i 50 --out runs --run-id attn-cudnn
    hipdnn-trace run graphs/perf/attention --backend torch --torch-sdpa-backend flash \\
        -w 10 -i 50 --out runs --run-id attn-torch-flash
    python benchmarks/attention_tflops.py runs/attn-cudnn runs/attn-torch-flash --peak 989

FLOPs are the analytical attention count (docs/hipdnn-format.md 3.10: 2 * Hq * (d_qk + d_v)
per kept (query, key) pair, x2.5 for the backward); times are each row's median device
time. ``--peak`` is the dense bf16/fp16 tensor-core peak in TFLOPS (H100/H200 SXM: 989).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl


def load(run: Path) -> pl.DataFrame:
    for name in ("summary.parquet", "summary.csv"):
        if (run / name).is_file():
            frame = pl.read_parquet(run / name) if name.endswith("parquet") else pl.read_csv(run / name)
            return frame.select("graph", "status", "validation", "median", "tflops", "flops", "error")
    raise SystemExit(f"{run}: no summary.parquet or summary.csv")


def cell(row: dict, peak: float | None) -> str:
    if row.get("status") != "ok" or row.get("tflops") is None:
        reason = (row.get("error") or row.get("status") or "-").split(":")[-1].strip()[:40]
        return f"- ({reason})"
    text = f"{row['tflops']:.0f}"
    if peak:
        text += f" ({100 * row['tflops'] / peak:.0f}%)"
    if row.get("validation") not in ("passed", None):
        text += f" [{row['validation']}]"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories, one column each")
    parser.add_argument("--peak", type=float, default=None, help="dense tensor-core peak, TFLOPS")
    args = parser.parse_args(argv)
    frames = [load(r) for r in args.runs]
    graphs = sorted({g for f in frames for g in f["graph"].to_list()})
    head = ["graph", "GFLOP", *[r.name for r in args.runs]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for g in graphs:
        rows = [f.filter(pl.col("graph") == g).to_dicts() for f in frames]
        flops = next((r[0]["flops"] for r in rows if r and r[0].get("flops")), None)
        cells = [cell(r[0], args.peak) if r else "-" for r in rows]
        print(f"| {g} | {flops / 1e9:.0f} | " + " | ".join(cells) + " |" if flops else f"| {g} | - | " +
              " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

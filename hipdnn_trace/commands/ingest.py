"""``hipdnn-trace ingest``: profiler output made outside the harness -> kernels/counters frames + trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.profilers.rocprof.detect import FORMATS

EXAMPLES = """\
examples:
  hipdnn-trace ingest out/ --out ingested/            # a rocprofv3 output directory (csv and/or rocpd)
  hipdnn-trace ingest host/123_kernel_trace.csv host/123_marker_api_trace.csv --out k/
  hipdnn-trace ingest results.db --out k/             # rocpd SQLite or legacy rocprof results.db
  hipdnn-trace ingest workloads/app/MI300X_A1/ --out k/ --arch gfx942   # rocprof-compute workload
  hipdnn-trace ingest old/ --format rocprof --out k/  # insist every file is legacy rocprof
  hipdnn-trace ingest R_raw.csv --out k/              # Nsight Compute: ncu --import R.ncu-rep --csv --page raw
  hipdnn-trace ingest R.ncu-rep --out k/              # the same, exported through ncu (needs ncu on PATH)

writes into --out: kernels, counters (long), counters_wide (one row per dispatch),
kernel_metrics (per kernel: derived metrics, and from ncu the why columns and limiter;
docs/nvidia.md "Why"), graph_limiters (each graph's kernel time by limiter) and graphs (derived,
when the GPU is known), stats, agents (.csv + .parquet); the harness's own kernels
(hipdnn_trace_hold, input generation) are left out,
trace.pftrace (Perfetto) and ingest.json (which file was read as what, what was skipped).

exit codes: 0 ok, 1 error (unreadable or malformed file, nothing to ingest)
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ingest",
        help=SUMMARIES["ingest"],
        description="Parse AMD profiler output (rocprofv3 CSV of ROCm 6.2-7.x, rocpd SQLite or its CSV "
                    "conversion, legacy rocprof v1 results, rocprofv2 text, rocprof-compute workloads) and "
                    "Nsight Compute's raw CSV page into "
                    "the kernels and counters frames hipdnn-trace runs write, join kernels to hipdnn-trace "
                    "iterations when the capture has its roctx/NVTX ranges, derive metrics and each kernel's "
                    "limiter when the GPU is known, and write a Perfetto trace. Formats are detected from "
                    "file headers.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or directories (searched recursively)")
    p.add_argument("--out", "-o", type=Path, required=True, help="output directory (created)")
    p.add_argument("--format", choices=tuple(FORMATS), default=None,
                   help="require every file to be of this format instead of detecting it")
    p.add_argument("--arch", default=None, help="GPU architecture for derived metrics (gfx90a, gfx942, gfx950, ...) "
                                                "when the files do not say")
    p.add_argument("--gpu", default=None, help="peak-table entry (profiles/peaks.toml), e.g. MI300X, MI250X")
    p.add_argument("--no-trace", dest="trace", action="store_false", help="do not write trace.pftrace")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing on success")
    p.set_defaults(main=main)


def _what(fmt: str | None, kind: str) -> str:
    """"rocprofv3 kernel trace"; a kind named after its format once ("rocpd", not "rocpd rocpd")."""
    words = kind.replace("_", " ")
    return words if fmt == kind else f"{fmt or '?'} {words}"


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.profilers.ingest import ingest, write

    result = ingest(args.paths, args.format, arch=args.arch, gpu=args.gpu)
    written = write(result, args.out, trace=args.trace)
    if not args.quiet:
        read = [d for d in result.files if d.parsed]
        kinds = sorted({_what(d.format, d.kind) for d in read})
        print(f"read {len(read)} file(s): {', '.join(kinds)}")
        print(f"{result.kernels.height} kernels, {result.counters.height} counter values "
              f"({result.counters_wide.height} dispatches), {result.kernel_metrics.height} in kernel_metrics")
        if result.graph_limiters.height:
            top = result.graph_limiters.sort("share_pct", descending=True).unique(subset=["graph_id", "config"],
                                                                                  keep="first", maintain_order=True)
            for r in top.iter_rows(named=True):
                print(f"graph {r['graph_id'] or '-'} {r['config'] or ''}: {r['limiter']} {r['share_pct']:.0f}% "
                      f"of kernel time (dominant kernel {str(r['dominant_kernel'])[:60]})")
        if result.memory.height:
            copies = result.memory.filter(pl.col("kind") == "MEMORY_COPY")
            print(f"{result.memory.height} memory events ({copies.height} copies, "
                  f"{result.memory.height - copies.height} allocation/scratch) in memory.csv")
        joined = result.kernels.filter(result.kernels["iteration"].is_not_null()).height if result.kernels.height else 0
        if joined:
            print(f"{joined} kernels joined to harness iterations")
        for note in result.notes:
            print(f"note: {note}", file=sys.stderr)
        print(f"wrote {len(written)} files to {args.out}")
    return 0

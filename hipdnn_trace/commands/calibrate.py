"""``hipdnn-trace calibrate``: measure this GPU's achievable GEMM and copy peaks into a peaks file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hipdnn_trace.atomic import write_text_atomic
from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.device.peaks import CLASSES, to_toml

EPILOG = """\
examples:
  hipdnn-trace calibrate                               # writes peaks-calibrated.toml for GPU 0
  hipdnn-trace calibrate --device 1 --out h100.toml --size 16384
  hipdnn-trace run graphs/perf/ --backend cudnn --peaks h100.toml   # speed of light on the measured roofs
  hipdnn-trace inspect graphs/perf/ --peaks h100.toml

Without a GPU (or without torch) it says so in one line and exits 1.
"""


def _classes(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in CLASSES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown data type {bad[0] if bad else text!r} "
                                         f"(known: {', '.join(CLASSES)})")
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from hipdnn_trace.device.calibrate import MEASURED

    parser = subparsers.add_parser(
        "calibrate", help=SUMMARIES["calibrate"], epilog=EPILOG,
        description="Time n x n x n GEMMs per data type and a device-to-device copy on this machine's GPU "
                    "with torch, and write the best rates as a peaks file (the peak table's format), for "
                    "--peaks of run and inspect (docs/speed-of-light.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", "-o", type=Path, default=Path("peaks-calibrated.toml"),
                        help="peaks file to write (default peaks-calibrated.toml)")
    parser.add_argument("--device", type=int, default=0, help="GPU index as torch counts them (default 0)")
    parser.add_argument("--size", type=_positive, default=8192, help="GEMM size n (default 8192)")
    parser.add_argument("--dtypes", type=_classes, default=list(MEASURED),
                        help=f"data types to time (default {','.join(MEASURED)})")
    parser.add_argument("--copy-gib", type=float, default=2.0, help="copy buffer size in GiB (default 2)")
    parser.set_defaults(main=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.device.calibrate import measure

    peaks, notes = measure(args.device, args.size, args.dtypes, args.copy_gib)
    for note in notes:
        print(f"hipdnn-trace calibrate: note: {note}", file=sys.stderr)
    write_text_atomic(args.out, to_toml([peaks]))
    print(f"{peaks.label}: HBM copy {peaks.hbm_tbs:.3g} TB/s")
    for cls in CLASSES:
        if cls in peaks.tflops:
            print(f"  {cls:<5} {peaks.tflops[cls]:9.1f} TFLOPS")
    print(f"-> {args.out} (use with --peaks {args.out})")
    return 0

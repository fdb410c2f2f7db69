"""argparse ``type=`` converters the subcommands share.

A bad value raises ArgumentTypeError, which argparse turns into one line naming the
flag (and the CLI into exit code 1), never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from hipdnn_trace.results.rundir import DNNBENCH, FORMATS

_N = TypeVar("_N", int, float)


def _number(text: str, convert: Callable[[str], _N], expected: str) -> _N:
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def non_negative_int(text: str) -> int:
    """A count that may be 0 (warmup, iterations, a device index)."""
    value = _number(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    """A count of at least 1 (array tasks, GPUs per task)."""
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def gib(text: str) -> float:
    """A size in GiB, > 0 and finite."""
    value = _number(text, float, "a size in GiB")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0 GiB, got {text}")
    return value


def fraction(text: str) -> float:
    """A share strictly between 0 and 1 (0.01 = 1%)."""
    value = _number(text, float, "a number")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (e.g. 0.01 for 1%), got {value}")
    return value


def seconds(text: str) -> float:
    """A time limit in seconds; 0 means none."""
    value = _number(text, float, "seconds")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: no limit), got {value:g}")
    return value


#: above these a tolerance no longer tests anything (every finite result would pass)
MAX_RTOL = 1.0
MAX_ATOL = 1e6


def tolerance(text: str) -> float:
    """--rtol / --atol: a finite number >= 0; one so large that validation passes anything is refused."""
    value = _number(text, float, "a number")
    if not value >= 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def run_id(text: str) -> str:
    """A run directory name: one path component (no separators, no '..', not hidden), so a run stays
    inside --out."""
    if not text or text in (".", "..") or "/" in text or "\\" in text or text.startswith(".") or "\0" in text:
        raise argparse.ArgumentTypeError(f"must be a plain folder name inside --out (no '/', '..' or leading "
                                         f"'.'), got {text!r}")
    return text


def formats(text: str) -> list[str]:
    """A comma-separated list of run-directory formats (csv, json, parquet)."""
    items = [f.strip().lower() for f in text.split(",") if f.strip()]
    if not items or any(f not in (*FORMATS, DNNBENCH) for f in items):
        raise argparse.ArgumentTypeError(f"formats are {', '.join((*FORMATS, DNNBENCH))}; got {text!r}")
    return items

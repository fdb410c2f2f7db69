"""argparse ``type=`` converters the subcommands share.

A bad value raises ArgumentTypeError, which argparse turns into one line naming the
flag (and the CLI into exit code 1), never a traceback.
"""

from __future__ import annotations

import argparse
import math
import re
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


def count_or_auto(text: str) -> str | int:
    """``auto`` or a count that may be 0 (``--build-workers``)."""
    return "auto" if text == "auto" else non_negative_int(text)


def positive_int(text: str) -> int:
    """A count of at least 1 (array tasks, GPUs per task)."""
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


#: --warmup, --iters, --max-iters: beyond ten million a run never ends in practice, and a typo
#: (``iters = 100000000000000000`` in a recipe) should not start one that runs until it is killed
MAX_ITERATIONS = 10**7
#: --array: Slurm's MaxArraySize is at most 4000001 (slurm.conf; the default is 1001), so an array of
#: 0..N-1 never has more tasks than that
MAX_ARRAY_TASKS = 4_000_001


def iterations(text: str) -> int:
    """An iteration count, 0 .. MAX_ITERATIONS (a larger one is a typo, not a benchmark)."""
    value = non_negative_int(text)
    if value > MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_ITERATIONS}, got {value}")
    return value


def array_tasks(text: str) -> int:
    """Slurm array tasks, 1 .. MAX_ARRAY_TASKS (Slurm's largest MaxArraySize)."""
    value = positive_int(text)
    if value > MAX_ARRAY_TASKS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_ARRAY_TASKS} (Slurm's largest MaxArraySize), "
                                         f"got {value}")
    return value


def milliseconds(text: str) -> float:
    """A duration in ms: finite and >= 0 (NaN would make every comparison with it false)."""
    value = _number(text, float, "milliseconds")
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
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


def percent(text: str) -> float:
    """A percentage, 0 .. 100 (--throttle-threshold 75)."""
    value = _number(text, float, "a percentage")
    if not 0 <= value <= 100:   # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, got {text}")
    return value


def seconds(text: str) -> float:
    """A time limit in seconds; 0 means none."""
    value = _number(text, float, "seconds")
    if not (math.isfinite(value) and value >= 0):   # NaN passes `< 0` and would never time out
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


#: a run id is one folder name every file system and shell takes as it is: letters, digits, ``._-``,
#: not hidden, short enough for NAME_MAX (255 bytes) with room for a writer's temp-file suffix
MAX_RUN_ID = 128
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def run_id(text: str) -> str:
    """A run directory name: one plain path component (no separators, no '..', not hidden, no control
    characters or spaces), so a run stays inside --out and its path can be pasted into a shell."""
    if not _RUN_ID.fullmatch(text) or len(text) > MAX_RUN_ID:
        raise argparse.ArgumentTypeError(f"must be a plain folder name inside --out (letters, digits, '.', '_' "
                                         f"and '-', not starting with '.', at most {MAX_RUN_ID} characters), "
                                         f"got {text!r}")
    return text


def plain_text(text: str) -> str:
    """A value written into a generated script line (an #SBATCH option): no control characters, since a
    newline would start another line of the script."""
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"control character {bad!r} not allowed, got {text!r}")
    return text


def formats(text: str) -> list[str]:
    """A comma-separated list of run-directory formats (csv, json, parquet)."""
    items = [f.strip().lower() for f in text.split(",") if f.strip()]
    if not items or any(f not in (*FORMATS, DNNBENCH) for f in items):
        raise argparse.ArgumentTypeError(f"formats are {', '.join((*FORMATS, DNNBENCH))}; got {text!r}")
    return items

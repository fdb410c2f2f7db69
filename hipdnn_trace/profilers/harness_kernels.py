"""The harness's own GPU kernels, so no profile counts them as a graph's.

One list for every profiler (ncu, CUPTI, rocprofv3) and for ``run`` and ``ingest`` alike.
The harness launches, besides the graph's kernels:

* ``hipdnn_trace_hold`` (device/cuda.py ``HOLD_KERNEL``): staged timing's hold kernel; it runs
  INSIDE the timed iteration's range, so only its name tells it apart;
* the counter-based input generator (bench/counter_rng.py ``_hash_torch``): torch int64
  ``arange``, ``*``, ``&``, ``<<``, ``>>``, ``^``, ``+`` and an int64 ``cat``;
* the inputs' table look-up (a torch ``index`` gather), output poisoning and the AMD L2 flush
  (torch ``fill_``): all outside the timed ranges.

The NVIDIA L2 flush is a ``cudaMemsetAsync`` (no kernel). Names were read from a real ncu
capture of a whole run (tests/data/ncu/whole_run_kernels.csv, H200, ncu 2025.3.1).

Where kernels carry the harness's range labels, a kernel inside a graph's range but outside its
warmup and timed loops (set-up, inputs, validation) is the harness's; inside the loops
:func:`is_harness_kernel` with ``in_range=True`` only
names the hold kernel, because a torch-backend graph may itself run a ``fill_`` or a gather
in its timed region; ``run --profile ncu`` profiles the timed ranges only in any case.
"""

from __future__ import annotations

import re

import polars as pl

#: The phases whose kernels are the graph's work (ncu_csv / markers_join labels).
GRAPH_PHASES = ("warmup", "timed")

#: Always the harness's, wherever it runs (demangled or mangled names: both contain these).
ALWAYS = ("hipdnn_trace_hold",)

#: The harness's input generation, poisoning and AMD flush, as torch names its kernels
#: (demangled: ``at::BitwiseXorFunctor<long>``; mangled: ``BitwiseXorFunctorIlE``).
_OUTSIDE = re.compile(
    r"arange_cuda_out|arange_out"
    r"|(MulFunctor|BitwiseAndFunctor|BitwiseXorFunctor|CUDAFunctor_add|CUDAFunctorOnSelf_add)(<long>|IlE)"
    r"|(lshift|rshift)_kernel_cuda.*(<long|IlE)|<long, long, long, at::(lshift|rshift)"
    r"|CatArrayBatchedCopy\w*<at::(<unnamed>|\(anonymous namespace\))::OpaqueType<8>"
    r"|FillFunctor|index_elementwise_kernel"
)


def is_harness_kernel(name: str | None, in_range: bool = False) -> bool:
    """True when kernel ``name`` is the harness's, not the graph's.

    ``in_range``: the kernel ran inside a graph's warmup/execute range (then only the hold
    kernel is the harness's: a torch graph may run fills and gathers of its own)."""
    if not name:
        return False
    if any(a in name for a in ALWAYS):
        return True
    return not in_range and _OUTSIDE.search(name) is not None


def harness_mask(frame: pl.DataFrame, name_col: str = "name") -> pl.Series:
    """Boolean per row: a harness kernel. A row inside a graph's range but outside its warmup and
    timed loops (set-up, inputs, validation, clean-up) is the harness's; one inside them is judged
    with ``in_range=True`` (only the hold kernel goes); an unlabelled row by the whole name list."""
    if frame.is_empty() or name_col not in frame.columns:
        return pl.Series("harness", [False] * frame.height, dtype=pl.Boolean)
    names = frame[name_col].to_list()
    if "graph_id" in frame.columns and frame["graph_id"].is_not_null().any():
        ranged = frame["graph_id"].is_not_null().to_list()
        phase = frame["phase"].to_list() if "phase" in frame.columns else [True] * frame.height
        return pl.Series("harness", [(r and p not in GRAPH_PHASES) or is_harness_kernel(n, in_range=r)
                                     for n, r, p in zip(names, ranged, phase)], dtype=pl.Boolean)
    return pl.Series("harness", [is_harness_kernel(n) for n in names], dtype=pl.Boolean)


def drop_harness(frame: pl.DataFrame, name_col: str = "name") -> tuple[pl.DataFrame, int]:
    """(frame without harness kernels, how many rows went)."""
    if frame.is_empty():
        return frame, 0
    mask = harness_mask(frame, name_col)
    return frame.filter(~mask), int(mask.sum())

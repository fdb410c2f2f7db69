"""Default tolerances per op and data type, from hipDNN's ``TestTolerances.hpp``.

Values are hipDNN's (test_sdk ``utilities/TestTolerances.hpp``; docs/hipdnn-format.md
section 4). hipDNN pairs one value with both atol and rtol, except conv fprop,
which has separate absolute and relative values. A fused graph is held to the
loosest tolerance of its ops: error accumulates through the chain. Types hipDNN's
table does not list get a bound from their precision (noted in the table below).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hipdnn_trace.graph.dtypes import is_integer
from hipdnn_trace.graph.model import Graph

# op -> dtype -> (atol, rtol)
_T = dict[str, tuple[float, float]]


def _same(values: dict[str, float]) -> _T:
    return {k: (v, v) for k, v in values.items()}


TABLE: dict[str, _T] = {
    "BatchnormInferenceAttributes": _same({"double": 1e-7, "float": 2e-4, "half": 5e-4, "bfloat16": 5e-3}),
    "BatchnormInferenceAttributesVarianceExt": _same({"double": 1e-7, "float": 2e-4, "half": 8e-4,
                                                     "bfloat16": 7e-3}),
    "BatchnormAttributes": _same({"double": 1e-7, "float": 4e-3, "half": 4e-3, "bfloat16": 8e-3}),
    "BatchnormBackwardAttributes": _same({"double": 1e-7, "float": 2e-3, "half": 4e-4, "bfloat16": 3e-3}),
    "RMSNormAttributes": _same({"double": 4e-3, "float": 4e-3, "half": 4e-3, "bfloat16": 8e-3}),
    "ConvolutionFwdAttributes": {"float": (1e-5, 1e-5), "half": (1e-1, 1e-2), "bfloat16": (1e-1, 2e-2)},
    "ConvolutionBwdAttributes": _same({"float": 8.5e-6, "half": 2e-2, "bfloat16": 2e-2}),
    "ConvolutionWrwAttributes": _same({"float": 2e-4, "half": 2e-1, "bfloat16": 2e-1}),
    "MatmulAttributes": _same({"float": 1e-5, "half": 1e-2, "bfloat16": 1e-2}),
    "ReductionAttributes": _same({"float": 1e-5, "half": 1e-2, "bfloat16": 5e-2}),
    "PointwiseAttributes": _same({"double": 1e-7, "float": 1e-5, "half": 1e-3, "bfloat16": 1e-2,
                                  "int8": 0.0}),
    "LayernormAttributes": _same({"double": 1e-5, "float": 1e-4, "half": 1e-3, "bfloat16": 1e-2}),
}

#: Types hipDNN's table leaves out: a few units in the last place of the type.
PRECISION_FALLBACK: dict[str, tuple[float, float]] = {
    "double": (1e-7, 1e-7),
    "float": (1e-4, 1e-4),
    "half": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
    "fp8_e4m3": (2.5e-1, 1.25e-1),
    "fp8_e5m2": (5e-1, 2.5e-1),
    "fp8_e4m3_fnuz": (2.5e-1, 1.25e-1),
    "fp8_e5m2_fnuz": (5e-1, 2.5e-1),
    "fp8_e8m0": (1.0, 1.0),
}
INTEGER_TYPES = {"int8", "uint8", "int32", "int64", "boolean"}


def op_tolerance(op_type: str, dtype: str) -> tuple[float, float]:
    """(atol, rtol) for one op writing ``dtype``."""
    if dtype in INTEGER_TYPES:
        return (0.0, 0.0)
    by_type = TABLE.get(op_type, {})
    if dtype in by_type:
        return by_type[dtype]
    return PRECISION_FALLBACK.get(dtype, (1e-2, 1e-2))


def graph_tolerance(graph: Graph, dtype: str, op_types: Iterable[str] | None = None) -> tuple[float, float]:
    """Loosest (atol, rtol) over the ops of the graph for an output of ``dtype``."""
    types = list(op_types) if op_types is not None else [n.type for n in graph.nodes]
    pairs = [op_tolerance(t, dtype) for t in types] or [PRECISION_FALLBACK.get(dtype, (1e-2, 1e-2))]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def type_epsilon(dtype: str) -> float:
    """Machine epsilon of a floating type (0 for integers): one unit in the last place at 1."""
    from hipdnn_trace.graph.dtypes import DTYPES

    info = DTYPES.get(dtype)
    if info is None or info.numpy is None or not info.is_float:
        return 0.0
    import ml_dtypes
    import numpy as np

    try:
        return float(np.finfo(info.numpy).eps)
    except ValueError:
        return float(ml_dtypes.finfo(info.numpy).eps)


def tolerance_for(
    graph: Graph, uid: int, *, atol: float | None = None, rtol: float | None = None
) -> tuple[float, float]:
    """(atol, rtol) for output ``uid``: user overrides win, else the graph's loosest op.

    The default rtol is never below the output type's epsilon: the output is compared
    with the unrounded float64 reference, and merely storing the exact answer in the
    type moves it by up to half an ulp, which some of hipDNN's half/bf16 values (e.g.
    batchnorm backward, 4e-4 for half) would otherwise count as a mismatch.
    For an integer output the pair is the graph's float tolerance: the slack a fractional
    result may take before the type's conversion (validate/integers.py).
    """
    dtype = graph.by_uid[uid].data_type
    if is_integer(dtype):
        # an integer output's tolerance is the float slack its unrounded value may take before
        # conversion (validate/integers.py): hipDNN's reference and kernels compute it in float
        dtype = "float"
    default_atol, default_rtol = graph_tolerance(graph, dtype)
    default_rtol = max(default_rtol, type_epsilon(dtype))
    return (default_atol if atol is None else atol, default_rtol if rtol is None else rtol)


def scaled_atol(atol: float, expected: object) -> float:
    """hipDNN's atol, scaled by the expected output's RMS magnitude when that exceeds 1.

    The table's absolute tolerances suit outputs of order 1. A kernel's absolute
    rounding error grows with the size of the sums it forms, so with inputs spread over
    several binary orders (bench/inputs.py) a correct fp32 conv whose outputs are ~10
    misses an atol of 8.5e-6 by rounding alone at the odd element where the sum cancels.
    Scaling by the tensor's RMS (a normwise criterion, as BLAS/LAPACK tests use) keeps
    the bound relative to the problem while leaving order-1 outputs at hipDNN's value.
    Summed chunk by chunk (``compare.CHUNK_ELEMENTS``), the chunks' sums added exactly (fsum); a
    device tensor (outputs judged on the GPU) is summed there.
    """
    import math

    sums, count = _finite_square_sums(expected)
    if count == 0:
        return atol
    rms = math.sqrt(math.fsum(sums) / count)
    return atol * max(1.0, rms)


def _finite_square_sums(expected: object) -> tuple[list[float], int]:
    """(sum of squares of the finite values per chunk, count of finite values): a whole-array mask,
    selection and square would be three more float64 copies."""
    import numpy as np

    from hipdnn_trace.validate.compare import CHUNK_ELEMENTS

    if type(expected).__module__.startswith("torch"):
        return _finite_square_sums_torch(expected, CHUNK_ELEMENTS)
    flat = np.asarray(expected).reshape(-1)
    sums: list[float] = []
    count = 0
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        values = flat[start:start + CHUNK_ELEMENTS].astype(np.float64, copy=False)
        finite = np.isfinite(values)
        if finite.all():     # the usual case: one pass, no selection copy
            sums.append(float(np.dot(values, values)))
            count += values.size
            continue
        kept = values[finite]
        sums.append(float(np.dot(kept, kept)))
        count += kept.size
    return sums, count


#: chunks a device sums with one batched product (64 of 1 Mi elements: a 512 MiB float64 copy); a chunk
#: at a time, its five small kernels were launch-bound (3,000 launches for a 537M-element output)
DEVICE_CHUNKS_PER_BATCH = 64


def _finite_square_sums_torch(expected: object, chunk: int,
                              chunks_per_batch: int | None = None) -> tuple[list[float], int]:
    """The host path's chunks and sums, ``chunks_per_batch`` chunks a batch (on a GPU
    :data:`DEVICE_CHUNKS_PER_BATCH`; in host memory one, the host path's memory bound), left on the device
    until all are queued: one transfer at the end (a transfer per chunk waited for the GPU 1,024 times on a
    537M-element output)."""
    import torch

    flat = expected.reshape(-1)   # type: ignore[attr-defined]
    size = int(flat.numel())
    if size == 0:
        return [], 0
    if chunks_per_batch is None:
        chunks_per_batch = DEVICE_CHUNKS_PER_BATCH if flat.device.type != "cpu" else 1
    full = size // chunk
    sums: list[Any] = []
    counts: list[Any] = []

    def queue(rows: Any) -> None:
        values = rows.to(torch.float64)
        finite = torch.isfinite(values)
        values = torch.where(finite, values, 0.0)
        sums.append(torch.einsum("ij,ij->i", values, values))   # one dot product per chunk (row)
        counts.append(finite.sum(dim=1))

    for first in range(0, full, chunks_per_batch):
        queue(flat[first * chunk:min(full, first + chunks_per_batch) * chunk].reshape(-1, chunk))
    if size % chunk:
        queue(flat[full * chunk:].reshape(1, -1))
    return [float(v) for v in torch.cat(sums).cpu().tolist()], int(torch.cat(counts).sum().cpu())

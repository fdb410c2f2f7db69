"""A process's one-time set-up, done before its first graph instead of inside it.

The first graph a process runs used to carry the CUDA context, cuDNN's library loads and
torch's cuBLAS handle (1-5 s on an H200, more when several ``--gpus`` workers start at once),
so that graph's wall said nothing about the graph. A resident child runs :func:`warm_process`
as its first job (``IsolatedRunner.warm``); what it costs is recorded per worker in run.json,
not in any graph's row.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hipdnn_trace import backends
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings


def warm_process(configs: Sequence[Config], settings: RunSettings) -> dict[str, float]:
    """Run each configured backend's optional ``warm_up`` hook (and torch's device set-up when the
    validating reference runs on the GPU); seconds spent per part. A failing hook is left to the
    first graph, which reports it where it belongs."""
    spent: dict[str, float] = {}
    for name in dict.fromkeys(c.backend for c in configs):
        hook = getattr(backends.get(name), "warm_up", None)
        if hook is None:
            continue
        started = time.perf_counter()
        try:
            hook(settings.options)
        except Exception:   # the graph that needs it reports the problem with its row
            continue
        spent[name] = round(time.perf_counter() - started, 3)
    if settings.reference_device == "cuda":
        from hipdnn_trace.backends.device_tensors import warm_torch_device

        started = time.perf_counter()
        try:
            warm_torch_device(settings.options.device)
            spent["reference"] = round(time.perf_counter() - started, 3)
        except Exception:
            pass
    return spent

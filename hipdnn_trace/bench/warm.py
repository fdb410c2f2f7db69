"""A process's one-time set-up, done before its first graph instead of inside it.

The first graph a process runs used to carry the CUDA context, cuDNN's library loads and
torch's cuBLAS handle (1-5 s on an H200, more when several ``--gpus`` workers start at once),
so that graph's wall said nothing about the graph. A resident child runs :func:`warm_process`
as its first job (``IsolatedRunner.warm``); what it costs is recorded per worker in run.json,
not in any graph's row.

Set-up alone left the first graph cold: on an H200 the first graph a child ran cost 1.2-1.5 s where
its twin run second cost 0.55 s (cuDNN's first plan build, the first device input, reference and
validation kernels: CUDA loads kernels on first use). So a GPU child also runs one small graph
(:func:`pipeline_graph`, a matmul + bias + GELU) through the whole pipeline with the run's own
configurations, and throws the result away.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from hipdnn_trace import backends
from hipdnn_trace.bench.config import ENGINE_ALL, ENGINE_LIST, Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import OK
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

#: the pipeline warm-up's graph (its name and its source's)
PIPELINE_GRAPH = "warm_up_matmul_bias_gelu"


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
    if on_gpu(configs, settings):
        started = time.perf_counter()
        if warm_pipeline(configs, settings):
            spent["pipeline"] = round(time.perf_counter() - started, 3)
    return spent


def loaded_versions(configs: Sequence[Config]) -> dict[str, str]:
    """The configured backends' library versions as this process loaded them (run.json ``versions``:
    the parent of isolated children records only what it knows without importing the libraries)."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(c.backend for c in configs):
        try:
            out.update(backends.get(name).versions())
        except Exception:   # noqa: BLE001 - a version probe never stops a run
            continue
    return out


def on_gpu(configs: Sequence[Config], settings: RunSettings) -> bool:
    """Whether the child has device kernels to load: a GPU backend or the reference on the GPU."""
    return settings.reference_device == "cuda" or any(c.backend != "reference" for c in configs)


def pipeline_graph() -> GraphSource:
    """A small bfloat16 matmul + bias + GELU (the LLM MLP block's shape of graph), as a graph source."""
    from hipdnn_trace.graph.build import GraphBuilder
    from hipdnn_trace.graph.write import dumps

    b = GraphBuilder(PIPELINE_GRAPH, io="bfloat16", compute="float", intermediate="float")
    y = b.matmul(b.tensor("a", [1, 128, 128]), b.tensor("b", [1, 128, 128]), virtual=True)
    z = b.pointwise("add", y, b.tensor("bias", [1, 1, 128]), virtual=True)
    b.pointwise("gelu_fwd", z, out="out")
    data = dumps(b.build()).encode()
    return GraphSource(PIPELINE_GRAPH, lambda: data)


def pipeline_configs(configs: Sequence[Config]) -> list[Config]:
    """One configuration per backend, on its default plan: the kernels to load are the pipeline's and each
    library's, not every engine's (an ``--engine all`` or autotuned run would build them all)."""
    first = {c.backend: c for c in reversed(configs)}
    return [replace(c, engine=None if c.engine in (ENGINE_ALL, ENGINE_LIST) else c.engine, autotune=False)
            for c in reversed(first.values())]


def warm_pipeline(configs: Sequence[Config], settings: RunSettings) -> bool:
    """Run :func:`pipeline_graph` once through inputs, reference, every configuration's build, a few
    executions and validation, with nothing recorded (no profiler hooks, golden files, saved tensors or
    reference cache); True when it ran. Any failure is left to the first real graph.

    The clock samplers and the CUPTI kernel clock run too: their process-wide start (NVML's and CUPTI's
    initialisation) cost the first graph of each child ~290 ms of its wall on an H100 host when left out
    (its ``t_other`` 390 ms against 105 ms for its twin run second)."""
    quiet = replace(settings, loop=LoopSettings(warmup=1, iters=2, throttle_threshold=0.0), hooks=(), golden=None,
                    save_tensors=None, reference_cache=None, require_kernel_clock=False, ab=False, ab_plan=None,
                    keep_outputs=False)
    try:
        run = run_graph(pipeline_graph(), pipeline_configs(configs), quiet, Markers())
    except Exception:   # noqa: BLE001 - a warm-up never stops a run
        return False
    run.drop_arrays()
    return any(c.status == OK for c in run.configs)

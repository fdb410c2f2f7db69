"""bench/warm.py: a GPU child's set-up runs one small graph through the whole pipeline, recording nothing.

No GPU here: ``on_gpu`` is decided by the configurations, and the pipeline graph runs on the float64
reference (the stand-in ``visible`` backend's tests in test_gpus.py show it in a real child).
"""

from __future__ import annotations

import pytest

from hipdnn_trace.bench import warm
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.graph.load import load_bytes


def test_the_pipeline_graph_is_a_small_matmul_bias_gelu() -> None:
    graph = load_bytes(warm.pipeline_graph().read(), warm.PIPELINE_GRAPH)
    assert [n.type for n in graph.nodes] == ["MatmulAttributes", "PointwiseAttributes", "PointwiseAttributes"]
    assert [n.params["operation"] for n in graph.nodes[1:]] == ["add", "gelu_fwd"]
    assert {t.data_type for t in graph.input_tensors} == {"bfloat16"}


def test_only_a_child_with_device_kernels_runs_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU reference alone has nothing to load; a GPU backend (or the reference on the GPU) has."""
    ran: list[list[str]] = []
    monkeypatch.setattr(warm, "warm_pipeline",
                        lambda configs, settings: ran.append([c.backend for c in configs]) or True)
    assert "pipeline" not in warm.warm_process([Config("reference", "reference")], RunSettings())
    assert ran == []
    assert warm.on_gpu([Config("reference", "reference")], RunSettings(reference_device="cuda"))
    assert warm.on_gpu([Config("x", "torch")], RunSettings())


def test_the_pipeline_records_nothing_of_the_run_but_starts_the_samplers() -> None:
    """Profiler hooks, golden files, saved tensors and the reference cache are left out (a hook that
    fails when used would make the pipeline fail); the clock samplers run, so their process-wide start
    (NVML's initialisation) is paid in the set-up, not by the first graph."""

    class Refusing:
        name = "refusing"

        def __getattr__(self, item: str):
            raise AssertionError(f"the warm-up used the run's hook ({item})")

    read: list[int] = []

    def sampler() -> dict[str, float | None]:
        read.append(1)
        return {"sm_clock_mhz": 1980.0}

    settings = RunSettings(hooks=(Refusing(),), samplers=(sampler,))   # type: ignore[arg-type]
    assert warm.warm_pipeline([Config("reference", "reference")], settings) is True
    assert read, "the samplers started during the warm-up"


def test_a_failing_pipeline_is_left_to_the_first_graph() -> None:
    assert warm.warm_pipeline([Config("nope", "no-such-backend")], RunSettings()) is False


def test_the_pipeline_runs_one_default_plan_per_backend() -> None:
    from hipdnn_trace.bench.config import ENGINE_ALL
    from hipdnn_trace.bench.warm import pipeline_configs

    configs = [Config("a", "cudnn", engine=ENGINE_ALL), Config("b", "cudnn", autotune=True), Config("t", "torch")]
    picked = pipeline_configs(configs)
    assert [(c.name, c.backend, c.engine, c.autotune) for c in picked] == [("a", "cudnn", None, False),
                                                                          ("t", "torch", None, False)]

"""GPU proof that a graph's data may live on the device: inputs made there carry the host's bits,
and a graph validated with its data on the GPU (inputs, float64 reference, outputs judged there)
gets the same verdicts as with everything on the host. Skipped without an NVIDIA GPU."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ulps import derived_statistics, ulps_apart

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.device_data import to_host
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "graphs"


def _sources() -> list:
    if not GRAPHS.is_dir():
        pytest.skip("graphs/ not present")
    return expand([str(GRAPHS)], skip_dirs=("perf",))


def test_device_inputs_have_the_host_bits_on_every_bundled_graph() -> None:
    """Drawn inputs and metadata bit for bit. A norm backward's saved mean / inv_variance / inv_rms
    are computed from x in float64 where x is (bench/norm_inputs.py): the GPU's reduction sums in
    another order than numpy's, which may move the float64 value by a few units and so, near a tie,
    the stored value by one unit of its type; those are compared within one unit in the last place."""
    for source in _sources():
        graph = load_bytes(source.read(), source.name)
        host = make_inputs(graph, 0)
        device = make_inputs(graph, 0, device="cuda:0")
        assert set(host) == set(device), source.name
        stats = derived_statistics(graph)
        for uid, value in host.items():
            got = to_host(device[uid])
            assert got.shape == np.asarray(value).shape, (source.name, uid)
            if uid in stats:   # saved norm statistics: float64 sums on the GPU, in another order
                assert int(ulps_apart(np.asarray(got), np.asarray(value)).max()) <= 1, (source.name, uid)
                continue
            assert np.asarray(got).tobytes() == np.ascontiguousarray(value).tobytes(), (source.name, uid)


def _verdicts(run) -> list[tuple]:
    """Pass/fail per output (counts may move by an element: the GPU's float64 oracle differs from the
    CPU's in the last bits, and some cuDNN kernels sum with atomics)."""
    return [(v.config, v.output, v.passed, v.total) for v in run.validation]


@pytest.mark.parametrize("backend", ["cudnn", "torch"])
def test_data_on_the_device_gives_the_host_verdicts(backend: str) -> None:
    """Every bundled graph, once with its data on the GPU and once on the host (CPU oracle)."""
    device = RunSettings(loop=LoopSettings(warmup=0, iters=1), reference_device="cuda")
    host = replace(device, reference_device="cpu")
    differ, placed = [], 0
    for source in _sources():
        on_device = run_graph(source, [Config(backend, backend)], device, Markers())
        on_host = run_graph(source, [Config(backend, backend)], host, Markers())
        statuses = [c.status for c in on_device.configs], [c.status for c in on_host.configs]
        if statuses[0] != statuses[1] or _verdicts(on_device) != _verdicts(on_host):
            differ.append((source.name, statuses, _verdicts(on_device), _verdicts(on_host)))
        placed += any(type(a).__module__.startswith("torch") for c in on_device.configs for a in c.outputs.values())
    assert not differ, [d[0] for d in differ] + differ[:2]
    assert placed > 0   # the device path really ran

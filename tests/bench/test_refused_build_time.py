"""A build the library refuses takes its time (cuDNN tries engine after engine: 0.4 s on one MoE graph of
graphs/perf on an H100); that time is the configuration's ``init`` phase, so the breakdown's t_init_ms holds it
and t_other_ms does not (docs/frames.md)."""

from __future__ import annotations

import time
from pathlib import Path

from hipdnn_trace.bench import arm_measure
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.records import UNSUPPORTED
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.load import load_file
from hipdnn_trace.markers import Markers

GRAPH = sorted((Path(__file__).resolve().parents[2] / "graphs" / "matmul").glob("*.json"))[0]


class SlowRefusal:
    """A backend whose plan build fails after a while, as a library that tries every engine first."""

    def prepare(self, graph, engine, options):
        time.sleep(0.2)
        raise UnsupportedError("no engine supports this graph")


def test_a_refused_build_is_an_init_phase(monkeypatch) -> None:
    monkeypatch.setattr(arm_measure.backends, "get", lambda name: SlowRefusal())
    run = arm_measure.measure(load_file(GRAPH), Config("slow", "slow"), None, {}, RunSettings(), Markers(), 0.0,
                              None)
    assert run.status == UNSUPPORTED and "no engine" in run.error
    (init,) = [p for p in run.phases if p.name == "init"]
    assert (init.end_ns - init.start_ns) / 1e9 >= 0.19

"""The progress line names the running graph's stage and counts the suite's ETA down.

Stages come from run_graph (inputs, reference, validate) and from the markers of each
configuration (prepare, init, warmup, execute = "timed", fetch); an isolated child sends them
over its pipe. The ETA is the estimates of the graphs left, scaled by how the finished ones
compared with theirs. A fake clock stands in for time: nothing here depends on how fast it runs.
"""

from __future__ import annotations

import io
import threading

import pytest
from reliability_helpers import write_graphs

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.isolation import IsolatedRunner
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.suite import SuiteCallbacks, run_suite
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.console import ETA_PRIOR_S, Progress, fmt_duration, remaining_s
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_remaining_time_scales_the_estimates_by_what_finished_graphs_took() -> None:
    assert remaining_s([10, 10, 10], 0, 0.0, 4.0) == pytest.approx(26.0)
    # the first graph took 20 s for an estimated 10: the rest is scaled by (20 + prior) / (10 + prior)
    factor = (20 + ETA_PRIOR_S) / (10 + ETA_PRIOR_S)
    assert remaining_s([10, 10, 10], 1, 20.0, 0.0) == pytest.approx(20 * factor)
    # the current graph outlasts its estimate: the rest will too
    slow = remaining_s([10, 10, 10], 0, 0.0, 30.0)
    assert slow == pytest.approx(20 * (30 + ETA_PRIOR_S) / (10 + ETA_PRIOR_S))
    assert remaining_s([10, 10], 0, 0.0, 1.0, current_left_s=2.0) == pytest.approx(12.0)
    assert remaining_s([10], 1, 12.0, 0.0) == 0.0


@pytest.mark.parametrize(("seconds", "text"), [(0.4, "0s"), (42, "42s"), (320, "5m20s"), (3900, "1h05m")])
def test_durations_read_at_a_glance(seconds: float, text: str) -> None:
    assert fmt_duration(seconds) == text


def test_a_long_graph_shows_its_stage_iterations_elapsed_time_and_the_eta() -> None:
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(3, stream=stream, enabled=True, estimates=[10, 10, 10], iters=5, clock=clock)
    progress.graph(0, "aotriton_perf_fwd")
    assert "load" in progress.line() and "eta 30s" in progress.line()
    clock.now += 4
    progress.stage("reference: execute")
    line = progress.line()
    assert "reference: timed (4s) | aotriton_perf_fwd" in line and "eta 26s" in line
    clock.now += 2
    progress.iteration(2)   # 2 of 5 timed iterations in 2 s: 3 s left for this graph, 20 s for the rest
    assert "reference: timed 2/5 (6s)" in progress.line() and "eta 23s" in progress.line()
    clock.now += 0.5   # the third iteration has run half its second: the count goes down, not up
    assert "eta 22s" in progress.line()
    clock.now += 13.5
    progress.graph(1, "next")   # the first graph took 20 s against 10 estimated
    assert f"eta {fmt_duration(20 * (20 + ETA_PRIOR_S) / (10 + ETA_PRIOR_S))}" in progress.line()
    assert "1/3" in progress.line()
    drawn = stream.getvalue()
    assert "reference: timed 2/5" in drawn and "\n" not in drawn


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_lone_graph_gets_the_line_only_when_it_is_expected_to_take_a_while() -> None:
    assert not Progress(1, stream=_Tty(), estimates=[0.5]).enabled
    assert Progress(1, stream=_Tty(), estimates=[30.0]).enabled
    assert Progress(3, stream=_Tty()).enabled and not Progress(3, stream=io.StringIO()).enabled


def test_without_estimates_the_eta_is_the_average_graph_so_far() -> None:
    clock = FakeClock()
    progress = Progress(4, stream=io.StringIO(), enabled=True, clock=clock)
    progress.graph(0, "a")
    assert "eta" not in progress.line()
    clock.now += 10
    progress.graph(1, "b")
    assert "eta 30s" in progress.line()


class _Signalling(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.event = threading.Event()

    def write(self, text: str) -> int:
        self.writes += 1
        if self.writes >= 3:
            self.event.set()
        return super().write(text)


def test_the_line_redraws_on_its_own_while_a_graph_sits_in_one_stage() -> None:
    stream = _Signalling()
    progress = Progress(2, stream=stream, enabled=True, estimates=[1, 1], tick_s=0.01)
    progress.graph(0, "one numpy call")
    try:
        assert stream.event.wait(10), "no redraw without a call from the run"
    finally:
        progress.close()
    assert not progress._ticker.is_alive()   # noqa: SLF001 - close() ends the thread


def test_an_isolated_childs_phases_reach_the_progress_line(faulty, tmp_path) -> None:
    sources = expand([str(p) for p in write_graphs(tmp_path, ["slow__a", "slow__b"])])
    stream = io.StringIO()
    progress = Progress(2, stream=stream, enabled=True, estimates=[1.0, 1.0], iters=3)
    seen: list[str] = []

    def stage(text: str) -> None:
        seen.append(text)
        progress.stage(text)

    settings = RunSettings(loop=LoopSettings(warmup=1, iters=3))
    with IsolatedRunner(timeout_s=60, resident=True) as runner:
        run_suite(sources, [Config("faulty", "faulty")], settings, Markers(),
                  SuiteCallbacks(before_graph=lambda i, s: progress.graph(i - 1, s.name),
                                 on_iteration=progress.iteration, on_stage=stage), runner=runner)
    for expected in ("load", "inputs", "reference", "faulty: prepare", "faulty: init", "faulty: warmup",
                     "faulty: execute", "faulty: fetch", "validate"):
        assert expected in seen, f"{expected!r} not reported by the child"
    drawn = stream.getvalue()
    assert "faulty: warmup" in drawn and "faulty: timed" in drawn and "eta " in drawn


@pytest.mark.parametrize("isolate", ["--isolate", "--no-isolate"])
def test_run_prints_stages_and_an_eta_on_the_progress_line(faulty, tmp_path, capsys, isolate) -> None:
    folder = tmp_path / "graphs"
    folder.mkdir()
    write_graphs(folder, ["slow__a", "ok__b"])
    code = cli_main(["run", str(folder), "--backend", "faulty", isolate, "--progress", "on", "-w", "1", "-i", "3",
                     "--out", str(tmp_path / "runs"), "--run-id", "r"])
    assert code == 0
    err = capsys.readouterr().err
    assert "faulty: timed" in err and "inputs" in err and " eta " in err
    assert "0/2" in err and "1/2" in err

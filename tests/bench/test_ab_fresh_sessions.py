"""Interleaved A/B with sessions re-created every round (run --ab-fresh-sessions): the placement of each
session's buffers becomes noise the rounds sample, not a bias. No GPU here, so placement has a
stand-in: two address slots handed out lowest first and freed on close (what an allocator does with
two same-sized sessions), and the session on slot 0 runs faster. On an H200 an A/A of cuDNN's rmsnorm
backward read B/A = 1.028 [1.0277, 1.0291] with the same engine on both sides that way."""

from __future__ import annotations

import json
import time
from pathlib import Path

import graph_dicts as hg
import pytest
from test_timing_sources import FakeKernelClock, FakeSession, FakeStagedTimer

from hipdnn_trace import backends
from hipdnn_trace.backends.base import Engine
from hipdnn_trace.backends.reference import ReferenceBackend, ReferenceSession
from hipdnn_trace.bench import ab, engines as engine_choice
from hipdnn_trace.bench.ab import Arm
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.paired import FASTER, SAME, SLOWER, UNDECIDED, ABPlan
from hipdnn_trace.bench.records import ConfigRun
from hipdnn_trace.cli import main
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rundir import load_run


class Slots:
    """Two device address slots, the lowest free one handed out first (a stand-in of the allocator)."""

    def __init__(self) -> None:
        self.taken: set[int] = set()

    def take(self) -> int:
        slot = min({0, 1} - self.taken)
        self.taken.add(slot)
        return slot

    def free(self, slot: int) -> None:
        self.taken.discard(slot)


class StandInPlacement:
    """``ab.Sessions`` over fake sessions: the kernel clock of a session on slot 0 reads 1.00 ms per
    window, on slot 1 1.05 ms (deterministic: the session prepared first in a pair is 5% faster)."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.slots, self.opened, self.fail_on = Slots(), [], fail_on

    def open(self, arm: Arm) -> None:
        self.opened.append(arm.run.config.name)
        if self.fail_on is not None and len(self.opened) == self.fail_on:
            raise RuntimeError("stand-in: out of memory")
        slot = self.slots.take()
        arm.session = FakeSession(FakeStagedTimer())
        arm.session.slot = slot
        arm.clock = FakeKernelClock(per_window=1.0 if slot == 0 else 1.05)

    def close(self, arm: Arm) -> None:
        if arm.session is not None:
            self.slots.free(arm.session.slot)
        arm.session = None


def _interleave(fresh_every: int, placement: StandInPlacement) -> ab.ABResult:
    arms = [Arm(ConfigRun(config=Config(name, "cudnn")), name) for name in ("a", "b")]
    for arm in arms:
        placement.open(arm)
    plan = ABPlan(block_iters=4, block_ms=0.0, min_rounds=8, max_rounds=16, fresh_every=fresh_every)
    return ab.interleave(arms, plan, LoopSettings(warmup=1, iters=4), Markers(), sessions=placement)


def test_stand_in_placement_without_fresh_sessions_reads_as_slower() -> None:
    result = _interleave(0, StandInPlacement())
    assert (result.verdict, result.recreated) == (SLOWER, 0)
    assert result.ratio == pytest.approx(1.05) and result.ci_low > 1.02


@pytest.mark.parametrize("fresh_every", [1, 2])
def test_stand_in_placement_with_fresh_sessions_is_noise_not_a_verdict(fresh_every: int) -> None:
    placement = StandInPlacement()
    result = _interleave(fresh_every, placement)
    assert result.verdict not in (FASTER, SLOWER)
    assert result.verdict == UNDECIDED   # a 5% placement effect is wider than the 2% band: honest
    assert result.ci_low < 1.0 < result.ci_high and result.ratio == pytest.approx(1.0)
    assert result.recreated == (result.rounds - 1) // fresh_every
    if fresh_every == 1:   # preparation order A B, B A, B A, A B, ... (ABBA over re-creations)
        pairs = [tuple(placement.opened[i:i + 2]) for i in range(0, 8, 2)]
        assert pairs == [("a", "b"), ("b", "a"), ("b", "a"), ("a", "b")]


def test_a_failed_re_creation_names_its_arm_and_reopens_the_other() -> None:
    placement = StandInPlacement(fail_on=3)   # the first re-creation prepares B first: B fails
    with pytest.raises(ab.BlockFailure) as caught:
        _interleave(1, placement)
    assert caught.value.index == 1 and "out of memory" in str(caught.value)
    assert placement.opened == ["a", "b", "b", "a"]


# -- through run: a stand-in backend whose second session in a pair sleeps ------------------------

class PlacedSession(ReferenceSession):
    """The reference, plus a 1 ms sleep per execute on slot 1: the session prepared second is slower."""

    def __init__(self, graph, slots: Slots) -> None:  # type: ignore[no-untyped-def]
        super().__init__(graph)
        self.slots, self.slot = slots, slots.take()

    def execute(self) -> None:
        if self.slot:
            time.sleep(0.001)
        super().execute()

    def close(self) -> None:
        self.slots.free(self.slot)
        super().close()


class PlacedBackend(ReferenceBackend):
    """Two engines to autotune over; every prepare's engine is remembered."""

    name = "placed"

    def __init__(self) -> None:
        self.slots, self.prepared = Slots(), []

    def engines(self, graph, options):  # type: ignore[override]
        return [Engine(0, "eng0"), Engine(1, "eng1")]

    def prepare(self, graph, engine, options):  # type: ignore[override]
        super().prepare(graph, engine, options)
        self.prepared.append(engine)
        return PlacedSession(graph, self.slots)


@pytest.fixture
def placed(monkeypatch: pytest.MonkeyPatch) -> PlacedBackend:
    backend = PlacedBackend()
    monkeypatch.setitem(backends.REGISTRY, "placed", "tests:PlacedBackend")
    monkeypatch.setitem(backends._instances, "placed", backend)
    return backend


FAST = ["-w", "1", "-i", "10", "--ab-block", "5", "--ab-block-ms", "0.5", "--ab-min-rounds", "8",
        "--ab-max-rounds", "8", "--no-trace"]


def _run(tmp_path: Path, run_id: str, *flags: str) -> dict:
    graph = hg.write(tmp_path / "g", [hg.add_relu()])[0]
    code = main(["run", str(graph), "--a", "placed", "--b", "placed", *FAST, *flags,
                 "--out", str(tmp_path / "runs"), "--run-id", run_id])
    assert code == 0
    return load_run(tmp_path / "runs" / run_id).ab.row(0, named=True)


def test_stand_in_backend_aa_is_slower_when_sessions_are_prepared_once(tmp_path: Path, placed: PlacedBackend) -> None:
    row = _run(tmp_path, "once", "--ab-fresh-sessions", "0")
    assert (row["verdict"], row["recreated"]) == (SLOWER, 0)


def test_stand_in_backend_aa_with_fresh_sessions_is_never_faster_or_slower(
        tmp_path: Path, placed: PlacedBackend, capsys: pytest.CaptureFixture[str]) -> None:
    row = _run(tmp_path, "fresh")
    assert row["verdict"] in (SAME, UNDECIDED)
    assert row["ci_low"] <= 1.0 <= row["ci_high"]
    assert row["recreated"] == row["rounds"] - 1 == 7
    meta = json.loads((tmp_path / "runs" / "fresh" / "run.json").read_text())
    assert meta["timing"]["ab"]["fresh_every"] == 1
    assert "sessions re-created 7 times" in capsys.readouterr().out


def test_stand_in_backend_re_creation_reuses_the_autotuned_engine(tmp_path: Path, placed: PlacedBackend,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def autotune(backend, graph, options, inputs, markers):  # type: ignore[no-untyped-def]
        calls.append(backend.name)
        return Engine(1, "eng1"), [(Engine(1, "eng1"), 0.1, "")]

    monkeypatch.setattr(engine_choice, "autotune", autotune)
    row = _run(tmp_path, "tuned", "--autotune")
    assert calls == ["placed", "placed"]   # once per configuration, never again on re-creation
    assert row["recreated"] == 7
    assert len(placed.prepared) == 2 * 8 and all(e == Engine(1, "eng1") for e in placed.prepared)

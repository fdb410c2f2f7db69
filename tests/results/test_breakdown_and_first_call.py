"""The per-graph time breakdown frame and first_call_ms, on the CPU reference backend."""

from __future__ import annotations

import json
from pathlib import Path

import graph_dicts as hg
import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.results import schemas
from hipdnn_trace.results.breakdown import CONFIG_PHASES, GRAPH_PHASES
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

TIME_COLUMNS = [c for c in schemas.BREAKDOWN if c.startswith("t_") or c == "wall_ms"]


def _run(root: Path, run_id: str, *extra: str) -> Path:
    if not (root / "graphs").exists():
        hg.write(root / "graphs", [hg.matmul(), hg.add_relu()])
    code = main(["run", str(root / "graphs"), "--out", str(root / "runs"), "--run-id", run_id,
                 "-w", "2", "-i", "5", "--quiet", *extra])
    assert code == 0
    return root / "runs" / run_id


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("bd"), "r", "--format", "parquet,dnnbench")


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("bdi"), "r", "--isolate")


def _check_breakdown(folder: Path) -> pl.DataFrame:
    df = pl.read_csv(folder / "breakdown.csv")
    assert df.columns == list(schemas.BREAKDOWN)
    assert df.height == 2   # one per graph x config
    for col in TIME_COLUMNS:
        values = df.get_column(col)
        assert values.null_count() == 0, col
        assert (values >= 0).all(), col
    for row in df.iter_rows(named=True):
        assert row["t_queue_ms"] >= 0   # a fast graph waits for the commit of the graphs after it
        phases = (sum(row[c] for c in GRAPH_PHASES) + row["t_write_ms"]   # the wait for the writer is not the graph's
                  + sum(row[c] for c in CONFIG_PHASES))
        assert phases <= row["wall_ms"] * (1 + 1e-9)
        assert phases + row["t_other_ms"] == pytest.approx(row["wall_ms"], rel=1e-9, abs=1e-6)
        for col in ("t_load_ms", "t_inputs_ms", "t_init_ms", "t_warmup_ms", "t_timed_ms",
                    "t_validate_ms", "t_write_ms"):
            assert row[col] > 0, col   # each of these phases ran
        assert row["t_reference_ms"] == 0   # the reference backend's own float64 result is the oracle
    return df


def test_breakdown_columns_present_non_negative_and_within_the_wall(in_process: Path) -> None:
    df = _check_breakdown(in_process)
    assert (df.get_column("t_process_ms") == 0).all()   # no child process without --isolate


def test_the_resident_child_starts_before_the_first_graph(isolated: Path) -> None:
    """The resident child (the default) starts and sets itself up before the first graph is handed
    out (bench/warm.py): no graph carries the process start, and run.json records the set-up."""
    df = _check_breakdown(isolated)
    assert df.get_column("t_process_ms").to_list() == [0.0] * df.height
    record = json.loads((isolated / "run.json").read_text())
    warm = record["isolation"]["warm_up_s"]
    # the reference backend has no warm_up hook: the set-up is the fork server's imports and the child's start
    assert set(warm) == {"fork_server", "child_start"} and min(warm.values()) >= 0
    assert sum(warm.values()) <= record["phases_s"]["set_up"] + 0.01
    # the server was started before the runner began to wait for it (set_up = what precedes the wait + its parts)
    started = record["isolation"]["server_started_s"]
    phases = record["phases_s"]
    assert 0 < started <= phases["before_plan"] + phases["plan"] + phases["set_up"] - warm["fork_server"] + 0.01


def test_the_set_up_parts_add_up_to_the_set_up() -> None:
    from hipdnn_trace.bench.isolation import set_up_parts

    parts = set_up_parts({"cudnn": 0.7, "pipeline": 0.4}, server_s=1.2, total_s=2.5)
    assert list(parts) == ["fork_server", "cudnn", "pipeline", "child_start"]
    assert parts["child_start"] == 0.2 and sum(parts.values()) == 2.5


def test_a_fresh_child_per_graph_counts_each_start(tmp_path: Path) -> None:
    hg.write(tmp_path / "graphs", [hg.add_relu(), hg.matmul()])
    assert main(["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "--run-id", "f",
                 "--isolate", "--fresh-child", "-w", "1", "-i", "4", "--quiet"]) == 0
    df = _check_breakdown(tmp_path / "runs" / "f")
    assert (df.get_column("t_process_ms") > 0).all()


def test_breakdown_rows_read_back_with_the_run(in_process: Path) -> None:
    run = load_run(in_process)
    assert run.breakdown.height == 2
    assert set(run.breakdown.get_column("graph_id")) == set(run.summary.get_column("graph_id"))


def test_first_call_ms_is_the_first_warmup_iteration(in_process: Path) -> None:
    run = load_run(in_process)
    for row in run.summary.iter_rows(named=True):
        first = run.iterations.filter((pl.col("graph_id") == row["graph_id"]) & (pl.col("phase") == "warmup")
                                      & (pl.col("iteration") == 0))
        assert row["first_call_ms"] == pytest.approx(first.item(0, "host_ms"), rel=1e-12)


def test_first_call_ms_without_warmup_is_the_first_timed_iteration(tmp_path: Path) -> None:
    hg.write(tmp_path / "graphs", [hg.add_relu()])
    assert main(["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "--run-id", "w0",
                 "-w", "0", "-i", "4", "--quiet"]) == 0
    run = load_run(tmp_path / "runs" / "w0")
    first = run.iterations.filter((pl.col("phase") == "timed") & (pl.col("iteration") == 0))
    assert run.summary.item(0, "first_call_ms") == pytest.approx(first.item(0, "host_ms"), rel=1e-12)


def test_dnnbench_export_carries_first_call_ms(in_process: Path) -> None:
    result = json.loads((in_process / "results.dnnbench.json").read_text())
    summary = load_run(in_process).summary
    by_name = dict(summary.select("graph", "first_call_ms").iter_rows())
    for g in result["graphs"]:
        (row,) = g["results"]
        # the plan's timing (in ootb since dnn-benchmarking @ 03382e30), rounded to 6 significant digits
        assert row["ootb"]["timing"]["first_call_ms"] == float(f"{by_name[g['graph_name']]:.6g}")


def test_fast_graphs_are_committed_together_and_wait_in_t_queue(tmp_path: Path) -> None:
    """Graphs that finish within COMMIT_EVERY_S of the last commit are committed with the next ones (one
    rewrite of the tables for several graphs): every graph is recorded once, and the time a graph's record
    waited for its commit is its t_queue_ms, not t_other_ms."""
    from hipdnn_trace.runs import measure

    names = [f"g{i}" for i in range(6)]
    hg.write(tmp_path / "graphs", [hg.add_relu(n) for n in names])
    commits: list[int] = []
    original = measure.RunWriter.add_graphs

    def counting(self, items):   # the real writer, counted
        commits.append(len(items))
        return original(self, items)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measure.RunWriter, "add_graphs", counting)
        mp.setattr(measure, "COMMIT_EVERY_S", 60.0)   # nothing is due before the suite ends
        assert main(["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "--run-id", "b",
                     "--no-isolate", "-w", "0", "-i", "2", "--quiet"]) == 0
    assert commits == [6]   # one commit, at the suite's end
    run = load_run(tmp_path / "runs" / "b")
    assert sorted(run.summary.get_column("graph").to_list()) == names
    queued = run.breakdown.sort("wall_ms").get_column("t_queue_ms").to_list()
    assert queued[0] >= 0 and queued[-1] > 0   # the first graph waited for the five after it


def test_a_graphs_wall_is_its_own_work_and_write_share_not_its_wait_for_the_writer() -> None:
    """wall_ms runs from the hand-out until the result was ready, plus its share of the commit;
    the wait for the writer (others' time) is shown as t_queue_ms and left out of the wall."""
    from hipdnn_trace.bench.loop import Phase
    from hipdnn_trace.bench.records import GraphRun
    from hipdnn_trace.results.breakdown import breakdown_rows

    ms = 1_000_000
    g = GraphRun(source="g.json", name="g", phases=[Phase("load", 0, 2 * ms), Phase("inputs", 2 * ms, 30 * ms)],
                 started_ns=0, ready_ns=100 * ms, queue_ms=500.0)
    (row,) = breakdown_rows("r", g, write_ms=4.0, commit_ns=600 * ms)
    assert row["wall_ms"] == pytest.approx(104.0)           # 100 ms of its own + 4 ms of the commit
    assert row["t_queue_ms"] == 500.0 and row["t_write_ms"] == 4.0
    assert row["t_other_ms"] == pytest.approx(104.0 - 2 - 28 - 4)
    g.ready_ns = None                                        # no ready time: its own work ends at the commit
    (row,) = breakdown_rows("r", g, write_ms=4.0, commit_ns=600 * ms)
    assert row["wall_ms"] == pytest.approx(604.0)


def test_graphs_committed_together_share_the_commits_write_time(tmp_path: Path) -> None:
    """A commit of k graphs gives each of them 1/k of its time (the same share), so the write
    column sums to the writer's time instead of k times it."""
    from hipdnn_trace.runs import measure

    hg.write(tmp_path / "graphs", [hg.add_relu(f"s{i}") for i in range(4)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measure, "COMMIT_EVERY_S", 60.0)   # one commit at the suite's end
        assert main(["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "--run-id", "w",
                     "--no-isolate", "-w", "0", "-i", "1", "--quiet"]) == 0
    writes = load_run(tmp_path / "runs" / "w").breakdown.get_column("t_write_ms").to_list()
    assert len(writes) == 4 and len(set(writes)) == 1 and writes[0] > 0


def test_only_the_release_after_the_hand_out_is_the_graphs() -> None:
    """A resident child frees the previous graph's memory after sending its record; the part of that
    after this graph was handed out (its job waited) is its t_release_ms, the rest is nobody's wall."""
    from hipdnn_trace.bench.loop import Phase
    from hipdnn_trace.bench.records import RELEASE_PHASE, GraphRun
    from hipdnn_trace.results.breakdown import breakdown_rows

    ms = 1_000_000
    g = GraphRun(source="g.json", name="g", started_ns=10 * ms, ready_ns=100 * ms,
                 phases=[Phase(RELEASE_PHASE, 4 * ms, 25 * ms), Phase("load", 25 * ms, 27 * ms)])
    (row,) = breakdown_rows("r", g, write_ms=0.0, commit_ns=100 * ms)
    assert row["wall_ms"] == pytest.approx(90.0)                   # from the hand-out, not the release's start
    assert row["t_release_ms"] == pytest.approx(15.0)              # 10..25 ms
    assert row["t_other_ms"] == pytest.approx(90.0 - 15.0 - 2.0)


def test_a_resident_childs_later_graphs_carry_its_release(isolated: Path) -> None:
    """The second graph of the resident child (in suite order: whichever ran second) has the phase."""
    df = pl.read_csv(isolated / "breakdown.csv")
    assert (df.get_column("t_release_ms") >= 0).all()
    trace_names = set(read_trace(isolated / "trace.pftrace").slices.get_column("name").to_list())
    assert "release previous" in trace_names


def test_a_commit_is_due_once_the_writing_stays_within_its_share(monkeypatch) -> None:
    """runs/measure.py commit_due: at least COMMIT_EVERY_S after the last commit, and at least the last commit's
    duration / WRITE_SHARE, so commits take at most that share of a suite whatever the tables' size."""
    from hipdnn_trace.runs import measure

    monkeypatch.setattr(measure, "COMMIT_EVERY_S", 0.5)
    assert not measure.commit_due(0.4, 0.001) and measure.commit_due(0.5, 0.001)   # small tables: every 0.5 s
    slow = 0.1   # a large run's commit: the next one waits for 0.1 / WRITE_SHARE
    assert not measure.commit_due(slow / measure.WRITE_SHARE - 0.01, slow)
    assert measure.commit_due(slow / measure.WRITE_SHARE, slow)
    assert slow / (slow + slow / measure.WRITE_SHARE) < 0.05   # issue 36: writing under 5% of the wall
    monkeypatch.setattr(measure, "COMMIT_EVERY_S", 0.0)
    assert measure.commit_due(0.0, 10.0)   # a commit per graph, as the kill tests ask

"""--shard I/N (1-based) and --shard auto pick deterministic, balanced, disjoint slices whatever the
file order; ``merge`` of shards 1..N equals the unsharded run and refuses duplicates and runs
timed differently. Runs use the faulty test backend (a GPU stand-in) in process."""

from __future__ import annotations

import json
import random
import re
import shutil

import polars as pl
import pytest
from reliability_helpers import assert_same_results, graph_json, write_graphs

from hipdnn_trace.bench.shard import ShardSpec, assign, select, source_key
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

NAMES = ["ok__a", "nan__b", "ok__c", "unwritten__d", "raise__e", "ok__f", "ok__g", "ok__h"]


@pytest.mark.parametrize("text, spec", [("1/1", ShardSpec(1, 1)), ("4/4", ShardSpec(4, 4)),
                                        (" 2 / 16 ", ShardSpec(2, 16))])
def test_shard_spec_parses(text, spec):
    assert ShardSpec.parse(text) == spec and str(spec) == f"{spec.index}/{spec.count}"


@pytest.mark.parametrize("text, problem", [
    ("0/4", "shards count from 1: use 1/4 .. 4/4"), ("0/1", "shards count from 1: use 1/1 .. 1/1"),
    ("5/4", "need 1 <= I <= N (shards of 4 are 1/4 .. 4/4)"), ("1/0", "N must be at least 1"),
    ("-1/4", "need 1 <= I <= N"), ("a/b", "expected I/N"), ("2", "expected I/N")])
def test_bad_shard_spec_is_a_user_error(text, problem):
    with pytest.raises(UserError, match=re.escape(problem)):
        ShardSpec.parse(text)


def test_assignment_is_balanced_disjoint_and_independent_of_order():
    keys = [f"{i:016x}" for i in range(103)]
    for count in (1, 2, 3, 7, 200):
        shards = assign(keys, count)
        assert set(shards) <= set(range(1, count + 1))
        sizes = [shards.count(s) for s in range(1, count + 1)]
        assert sum(sizes) == len(keys) and max(sizes) - min(sizes) <= 1
        shuffled = keys[:]
        random.Random(count).shuffle(shuffled)
        by_key = dict(zip(shuffled, assign(shuffled, count)))
        assert by_key == dict(zip(keys, shards))


def test_identical_graphs_share_a_shard():
    keys = ["a", "b", "c", "b", "d", "b"]
    shards = assign(keys, 3)
    assert shards[1] == shards[3] == shards[5]


def test_source_key_is_the_graph_not_the_file(tmp_path):
    g = graph_json("same")
    (tmp_path / "compact.json").write_text(json.dumps(g))
    (tmp_path / "pretty.json").write_text(json.dumps(g, indent=4))
    (tmp_path / "broken.json").write_bytes(b"{not json")
    keys = {k.name.rsplit("/", 1)[1]: k for k in map(source_key, expand([str(tmp_path)]))}
    assert keys["compact.json"].key == keys["pretty.json"].key == keys["pretty.json"].graph_id
    assert keys["broken.json"].graph_id is None and keys["broken.json"].key.startswith("bytes:")


def test_source_key_of_a_file_that_cannot_be_read_is_its_name(tmp_path):
    from hipdnn_trace.graph.load import MAX_FILE_BYTES

    with open(tmp_path / "huge.json", "wb") as fh:   # sparse: refused before a byte is read
        fh.truncate(MAX_FILE_BYTES + 1)
    (tmp_path / "gone.json").write_text("{}")
    huge, gone = expand([str(tmp_path / "huge.json"), str(tmp_path / "gone.json")])
    (tmp_path / "gone.json").unlink()
    for source in (huge, gone):
        k = source_key(source)
        assert k.graph_id is None and k.key.startswith("name:")


def test_slice_does_not_depend_on_listing_order(tmp_path):
    paths = write_graphs(tmp_path, NAMES)
    forward = expand([str(p) for p in paths])
    backward = expand([str(p) for p in reversed(paths)])
    for index in (1, 2, 3):
        spec = ShardSpec(index, 3)
        pick = lambda sources, spec=spec: {sources[i].name for i in select([source_key(s) for s in sources], spec)}
        assert pick(forward) == pick(backward)


@pytest.fixture
def suite(tmp_path):
    folder = tmp_path / "graphs"
    write_graphs(folder, NAMES)
    (folder / "zz_broken.json").write_bytes(b'{"name": "broken", "tensors": []}')   # fails to load
    return folder


def _run(suite, out, run_id, *extra):
    return cli_main(["run", str(suite), "--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2",
                     "--out", str(out), "--run-id", run_id, "-q", *extra])


def test_merged_shards_equal_the_unsharded_run(faulty, suite, tmp_path, capsys):
    assert _run(suite, tmp_path, "whole") == 1            # raise__e and the broken file are errors
    codes = [_run(suite, tmp_path, f"s{i}", "--shard", f"{i}/3") for i in (1, 2, 3)]
    shards = [load_run(tmp_path / f"s{i}") for i in (1, 2, 3)]
    assert [s.meta["shard"]["index"] for s in shards] == [1, 2, 3]
    sizes = [len(s.meta["graphs"]) for s in shards]
    assert sorted(sizes) == [3, 3, 3] and set(codes) <= {0, 1, 2}
    assert sorted(g for s in shards for g in s.meta["graphs"]) == sorted(load_run(tmp_path / "whole").meta["graphs"])
    capsys.readouterr()
    # inputs in any order: rows come back in suite order
    assert cli_main(["merge", str(tmp_path / "s3"), str(tmp_path / "s1"), str(tmp_path / "s2"),
                     "--out", str(tmp_path / "merged")]) == 0
    assert "merged 3 run(s): 9 graph(s)" in capsys.readouterr().out
    assert_same_results(tmp_path / "whole", tmp_path / "merged")
    merged = load_run(tmp_path / "merged")
    whole = load_run(tmp_path / "whole")
    assert merged.meta["graphs"] == whole.meta["graphs"]
    assert merged.meta["status"] == "complete" and len(merged.meta["merged_from"]) == 3
    assert sorted(m["shard"] for m in merged.meta["merged_from"]) == ["1/3", "2/3", "3/3"]
    assert "warnings" not in merged.meta or not merged.meta["warnings"]
    assert set(merged.summary.get_column("run_id").to_list()) == {"merged"}
    trace = read_trace(tmp_path / "merged" / "trace.pftrace")
    assert not trace.truncated
    assert trace.slices.filter(pl.col("name").str.starts_with("graph ")).height == \
        read_trace(tmp_path / "whole" / "trace.pftrace").slices.filter(
            pl.col("name").str.starts_with("graph ")).height


def test_merge_refusals_are_one_line_errors(faulty, suite, tmp_path, capsys):
    assert _run(suite, tmp_path, "whole") == 1
    assert _run(suite, tmp_path, "s0", "--shard", "1/2") in (0, 1, 2)
    assert cli_main(["run", str(suite), "--backend", "faulty", "--no-isolate", "-w", "2", "-i", "2",
                     "--out", str(tmp_path), "--run-id", "s1w", "--shard", "2/2", "-q"]) in (0, 1, 2)
    capsys.readouterr()

    def refused(*args) -> str:
        assert cli_main(["merge", *map(str, args)]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("hipdnn-trace merge: error: ") and "\n" not in err
        return err

    assert "was timed differently" in refused(tmp_path / "s0", tmp_path / "s1w", "--out", tmp_path / "m1")
    assert "(warmup: 1 vs 2)" in refused(tmp_path / "s0", tmp_path / "s1w", "--out", tmp_path / "m1")
    err = refused(tmp_path / "s0", tmp_path / "whole", "--out", tmp_path / "m2")
    assert "is in both" in err and "merge each shard once" in err
    assert "is given twice" in refused(tmp_path / "s0", tmp_path / "s0", "--out", tmp_path / "m3")
    assert "is one of the inputs" in refused(tmp_path / "s0", tmp_path / "whole", "--out", tmp_path / "whole")
    assert "not a run directory" in refused(tmp_path / "nowhere", "--out", tmp_path / "m4")
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m2").exists()


def test_merge_warns_about_missing_shards(faulty, suite, tmp_path, capsys):
    assert _run(suite, tmp_path, "s1", "--shard", "1/3") in (0, 1, 2)
    assert _run(suite, tmp_path, "s3", "--shard", "3/3") in (0, 1, 2)
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "s1"), str(tmp_path / "s3"), "--out", str(tmp_path / "m")]) == 0
    assert "warning: shard(s) 2 of 3 not among the inputs" in capsys.readouterr().err
    assert load_run(tmp_path / "m").meta["warnings"] == ["shard(s) 2 of 3 not among the inputs"]


def test_more_shards_than_graphs_leaves_empty_slices_that_succeed(faulty, tmp_path):
    write_graphs(tmp_path / "g", ["ok__a", "ok__b"])
    codes = [cli_main(["run", str(tmp_path / "g"), "--backend", "faulty", "--no-isolate", "-w", "0", "-i", "1",
                       "--out", str(tmp_path), "--run-id", f"s{i}", "--shard", f"{i}/4", "-q"]) for i in range(1, 5)]
    assert codes == [0, 0, 0, 0]
    assert sorted(len(load_run(tmp_path / f"s{i}").meta["graphs"]) for i in range(1, 5)) == [0, 0, 1, 1]
    assert cli_main(["merge", *(str(tmp_path / f"s{i}") for i in range(1, 5)), "--out", str(tmp_path / "m")]) == 0
    assert load_run(tmp_path / "m").summary.height == 2


@pytest.mark.parametrize("damage, problem", [
    (lambda f: f.write_bytes(b"\x00\x9f garbage \xff\n1,2\n"), "cannot read ("),
    (lambda f: f.write_text("name,value\nx,1\n"), "not a summary table (no column graph, config, status, n, median)"),
    (lambda f: f.write_bytes(b""), "empty file (0 bytes)"),
    (lambda f: f.unlink(), "missing; not a finished run directory"),
])
def test_merge_and_report_refuse_a_broken_summary_naming_the_file(faulty, suite, tmp_path, capsys, damage, problem):
    assert _run(suite, tmp_path, "whole") == 1
    shutil.copytree(tmp_path / "whole", tmp_path / "copy")
    damage(tmp_path / "copy" / "summary.csv")
    capsys.readouterr()
    for args in (["merge", str(tmp_path / "whole"), str(tmp_path / "copy"), "--out", str(tmp_path / "m")],
                 ["report", str(tmp_path / "copy")],
                 ["compare", str(tmp_path / "whole"), str(tmp_path / "copy")]):
        assert cli_main(args) == 1, args
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err
        assert f"{tmp_path / 'copy' / 'summary.csv'}: {problem}" in err, err
    assert not (tmp_path / "m").exists() and not (tmp_path / "copy" / "report.html").exists()


def test_merge_refuses_a_run_and_a_copy_of_itself(faulty, suite, tmp_path, capsys):
    assert _run(suite, tmp_path, "whole") == 1
    shutil.copytree(tmp_path / "whole", tmp_path / "copy")
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "whole"), str(tmp_path / "copy"), "--out", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err.strip()
    assert f"is in both {tmp_path / 'whole'} and {tmp_path / 'copy'}" in err
    assert not (tmp_path / "m").exists()


def test_report_of_a_run_with_no_graph_is_refused(faulty, tmp_path, capsys):
    write_graphs(tmp_path / "g", ["ok__a"])
    assert cli_main(["run", str(tmp_path / "g"), "--backend", "faulty", "--no-isolate", "-w", "0", "-i", "1",
                     "--out", str(tmp_path), "--run-id", "s1", "--shard", "2/2", "-q"]) == 0   # the empty slice
    capsys.readouterr()
    assert cli_main(["report", str(tmp_path / "s1")]) == 1
    assert "summary.csv: no graph recorded; nothing to report" in capsys.readouterr().err


def test_merge_drops_orphan_rows_of_a_shard_killed_mid_write(faulty, suite, tmp_path, capsys):
    """A shard killed between renames: its last graph is in iterations and validation, not in
    summary.csv. Those rows are dropped with a warning; the merge equals merging the shard's
    finished part."""
    assert _run(suite, tmp_path, "s0", "--shard", "1/2") in (0, 1, 2)
    assert _run(suite, tmp_path, "s1", "--shard", "2/2") in (0, 1, 2)
    s1 = tmp_path / "s1"
    summary = pl.read_csv(s1 / "summary.csv", infer_schema_length=None)
    last = summary.filter(pl.col("status") == "ok").get_column("graph").to_list()[-1]
    summary.filter(pl.col("graph") != last).write_csv(s1 / "summary.csv")
    before = load_run(s1)
    orphans = (before.iterations.filter(pl.col("graph") == last).height,
               before.validation.filter(pl.col("graph") == last).height)
    assert min(orphans) > 0
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "s0"), str(s1), "--out", str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert (f"warning: {s1}: dropped row(s) of graphs with no summary row ({orphans[0]} iterations, "
            f"{orphans[1]} validation") in err
    merged = load_run(tmp_path / "m")
    assert last not in merged.iterations.get_column("graph").to_list()
    assert last not in merged.validation.get_column("graph").to_list()
    assert merged.iterations.height == load_run(tmp_path / "s0").iterations.height + \
        before.iterations.height - orphans[0]
    assert any("dropped row(s)" in w for w in merged.meta["warnings"])


def _array(task, count, low=None, high=None, step=None):
    env = {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count)}
    for name, value in (("MIN", low), ("MAX", high), ("STEP", step)):
        if value is not None:
            env[f"SLURM_ARRAY_TASK_{name}"] = str(value)
    return env


@pytest.mark.parametrize("env, index, count", [
    (_array(0, 4, 0, 3, 1), 1, 4), (_array(3, 4, 0, 3, 1), 4, 4),       # --array=0-3
    (_array(1, 4, 1, 4, 1), 1, 4), (_array(4, 4, 1, 4, 1), 4, 4),       # --array=1-4
    (_array(5, 4, 1, 7, 2), 3, 4),                                      # --array=1-7:2 -> 1,3,5,7
    (_array(2, 3), 3, 3),                                               # no MIN/MAX: ids from 0
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, 1, 2),                 # srun -n 2
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, 2, 2),
    ({**_array(2, 4, 0, 3, 1), "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 3, 4),   # the array wins
])
def test_shard_auto_maps_the_slurm_task_to_1_of_n(env, index, count):
    spec = ShardSpec.parse("auto", env)
    assert (spec.index, spec.count) == (index, count)
    assert spec.variables and all(env[name] == value for name, value in spec.variables)


@pytest.mark.parametrize("env, problem", [
    ({}, "none of SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or SLURM_PROCID/SLURM_NTASKS is set"),
    ({"SLURM_ARRAY_TASK_ID": "1"}, "SLURM_ARRAY_TASK_COUNT is not"),
    (_array(3, 2, 3, 7, 1), "not one range MIN..MAX by STEP; give these tasks --shard I/N"),   # --array=3,7
    (_array("x", 2), "$SLURM_ARRAY_TASK_ID is 'x', not an integer"),
    (_array(9, 4, 0, 3, 1), "is not one of the array's ids 0..3 by 1"),
    ({"SLURM_PROCID": "2", "SLURM_NTASKS": "2"}, "is not a rank of $SLURM_NTASKS=2"),
])
def test_shard_auto_outside_a_usable_slurm_task_is_a_user_error(env, problem):
    with pytest.raises(UserError, match=re.escape(problem)):
        ShardSpec.parse("auto", env)


def test_shard_zero_is_a_one_line_error_with_a_hint(faulty, suite, tmp_path, capsys):
    assert _run(suite, tmp_path, "s", "--shard", "0/3") == 1
    err = capsys.readouterr().err.strip()
    assert "shards count from 1: use 1/3 .. 3/3" in err and "\n" not in err
    assert not (tmp_path / "s").exists()


def test_shard_auto_records_the_variables_it_used(faulty, suite, tmp_path, monkeypatch):
    for name in ("SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in _array(12, 3, 10, 14, 2).items():
        monkeypatch.setenv(name, value)
    assert _run(suite, tmp_path, "auto", "--shard", "auto") in (0, 1, 2)
    assert _run(suite, tmp_path, "by-hand", "--shard", "2/3") in (0, 1, 2)
    auto, by_hand = load_run(tmp_path / "auto").meta, load_run(tmp_path / "by-hand").meta
    assert auto["shard"] == by_hand["shard"] and auto["shard"]["index"] == 2
    assert auto["shard_from"] == {"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_COUNT": "3",
                                  "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_MAX": "14",
                                  "SLURM_ARRAY_TASK_STEP": "2"}
    assert by_hand["shard_from"] is None


def test_merge_takes_a_folder_of_shards_or_a_glob(faulty, suite, tmp_path, capsys):
    shards = tmp_path / "sweep" / "shards"
    for i in (1, 2, 3):
        assert _run(suite, shards, f"shard-{i}", "--shard", f"{i}/3") in (0, 1, 2)
    (shards / "shard-4").mkdir()   # a task that never started: skipped with a warning
    assert _run(suite, tmp_path, "whole") == 1
    capsys.readouterr()
    assert cli_main(["merge", str(shards), "--out", str(tmp_path / "by-folder")]) == 0
    out, err = capsys.readouterr()
    assert "merged 3 run(s)" in out and f"{shards / 'shard-4'}: no run.json" in err
    assert_same_results(tmp_path / "whole", tmp_path / "by-folder")
    assert cli_main(["merge", str(shards / "shard-*"), "--out", str(tmp_path / "by-glob")]) == 0
    assert_same_results(tmp_path / "whole", tmp_path / "by-glob")
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "sweep" / "nothing-*"), "--out", str(tmp_path / "m")]) == 1
    assert "nothing-*: matches no folder" in capsys.readouterr().err
    assert cli_main(["merge", str(shards / "shard-4"), "--out", str(tmp_path / "m")]) == 1
    assert "shard-4: not a run directory (no run.json) and holds none" in capsys.readouterr().err


def test_merge_counts_shards_of_runs_recorded_0_based(faulty, suite, tmp_path, capsys):
    """run.json of versions before 1-based shards: index 0..N-1; a missing shard is still named right."""
    for i in (1, 3):
        assert _run(suite, tmp_path, f"s{i}", "--shard", f"{i}/3") in (0, 1, 2)
        meta = json.loads((tmp_path / f"s{i}" / "run.json").read_text())
        meta["shard"]["index"] -= 1
        (tmp_path / f"s{i}" / "run.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "s1"), str(tmp_path / "s3"), "--out", str(tmp_path / "m")]) == 0
    assert "shard(s) 1 of 3 not among the inputs" in capsys.readouterr().err

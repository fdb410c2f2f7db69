"""--shard I/N picks deterministic, balanced, disjoint slices whatever the file order;
``merge`` of shards 0..N-1 equals the unsharded run and refuses duplicates and runs
timed differently. Runs use the faulty test backend (a GPU stand-in) in process."""

from __future__ import annotations

import json
import random
import shutil

import polars as pl
import pytest

from hipdnn_trace.bench.shard import ShardSpec, assign, select, source_key
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

from reliability_helpers import assert_same_results, graph_json, write_graphs

NAMES = ["ok__a", "nan__b", "ok__c", "unwritten__d", "raise__e", "ok__f", "ok__g", "ok__h"]


@pytest.mark.parametrize("text, spec", [("0/1", ShardSpec(0, 1)), ("3/4", ShardSpec(3, 4)), (" 2 / 16 ", ShardSpec(2, 16))])
def test_shard_spec_parses(text, spec):
    assert ShardSpec.parse(text) == spec and str(spec) == f"{spec.index}/{spec.count}"


@pytest.mark.parametrize("text, problem", [("4/4", "need 0 <= I < N"), ("1/0", "need 0 <= I < N"),
                                           ("-1/4", "expected I/N"), ("a/b", "expected I/N"), ("2", "expected I/N")])
def test_bad_shard_spec_is_a_user_error(text, problem):
    with pytest.raises(UserError, match=problem):
        ShardSpec.parse(text)


def test_assignment_is_balanced_disjoint_and_independent_of_order():
    keys = [f"{i:016x}" for i in range(103)]
    for count in (1, 2, 3, 7, 200):
        shards = assign(keys, count)
        sizes = [shards.count(s) for s in range(count)]
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
    for index in range(3):
        spec = ShardSpec(index, 3)
        pick = lambda sources: {sources[i].name for i in select([source_key(s) for s in sources], spec)}
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
    codes = [_run(suite, tmp_path, f"s{i}", "--shard", f"{i}/3") for i in range(3)]
    shards = [load_run(tmp_path / f"s{i}") for i in range(3)]
    sizes = [len(s.meta["graphs"]) for s in shards]
    assert sorted(sizes) == [3, 3, 3] and set(codes) <= {0, 1, 2}
    assert sorted(g for s in shards for g in s.meta["graphs"]) == sorted(load_run(tmp_path / "whole").meta["graphs"])
    capsys.readouterr()
    # inputs in any order: rows come back in suite order
    assert cli_main(["merge", str(tmp_path / "s2"), str(tmp_path / "s0"), str(tmp_path / "s1"),
                     "--out", str(tmp_path / "merged")]) == 0
    assert "merged 3 run(s): 9 graph(s)" in capsys.readouterr().out
    assert_same_results(tmp_path / "whole", tmp_path / "merged")
    merged = load_run(tmp_path / "merged")
    whole = load_run(tmp_path / "whole")
    assert merged.meta["graphs"] == whole.meta["graphs"]
    assert merged.meta["status"] == "complete" and len(merged.meta["merged_from"]) == 3
    assert set(merged.summary.get_column("run_id").to_list()) == {"merged"}
    trace = read_trace(tmp_path / "merged" / "trace.pftrace")
    assert not trace.truncated
    assert trace.slices.filter(pl.col("name").str.starts_with("graph ")).height == \
        read_trace(tmp_path / "whole" / "trace.pftrace").slices.filter(
            pl.col("name").str.starts_with("graph ")).height


def test_merge_refusals_are_one_line_errors(faulty, suite, tmp_path, capsys):
    assert _run(suite, tmp_path, "whole") == 1
    assert _run(suite, tmp_path, "s0", "--shard", "0/2") in (0, 1, 2)
    assert cli_main(["run", str(suite), "--backend", "faulty", "--no-isolate", "-w", "2", "-i", "2",
                     "--out", str(tmp_path), "--run-id", "s1w", "--shard", "1/2", "-q"]) in (0, 1, 2)
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
    assert _run(suite, tmp_path, "s0", "--shard", "0/3") in (0, 1, 2)
    assert _run(suite, tmp_path, "s2", "--shard", "2/3") in (0, 1, 2)
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "s0"), str(tmp_path / "s2"), "--out", str(tmp_path / "m")]) == 0
    assert "warning: shard(s) 1 of 3 not among the inputs" in capsys.readouterr().err
    assert load_run(tmp_path / "m").meta["warnings"] == ["shard(s) 1 of 3 not among the inputs"]


def test_more_shards_than_graphs_leaves_empty_slices_that_succeed(faulty, tmp_path):
    write_graphs(tmp_path / "g", ["ok__a", "ok__b"])
    codes = [cli_main(["run", str(tmp_path / "g"), "--backend", "faulty", "--no-isolate", "-w", "0", "-i", "1",
                       "--out", str(tmp_path), "--run-id", f"s{i}", "--shard", f"{i}/4", "-q"]) for i in range(4)]
    assert codes == [0, 0, 0, 0]
    assert sorted(len(load_run(tmp_path / f"s{i}").meta["graphs"]) for i in range(4)) == [0, 0, 1, 1]
    assert cli_main(["merge", *(str(tmp_path / f"s{i}") for i in range(4)), "--out", str(tmp_path / "m")]) == 0
    assert load_run(tmp_path / "m").summary.height == 2


@pytest.mark.parametrize("damage, problem", [
    (lambda f: f.write_bytes(b"\x00\x9f garbage \xff\n1,2\n"), "cannot read ("),
    (lambda f: f.write_text("name,value\nx,1\n"), "not a summary table (no column graph, config, status)"),
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
                     "--out", str(tmp_path), "--run-id", "s1", "--shard", "1/2", "-q"]) == 0   # the empty slice
    capsys.readouterr()
    assert cli_main(["report", str(tmp_path / "s1")]) == 1
    assert "summary.csv: no graph recorded; nothing to report" in capsys.readouterr().err


def test_merge_drops_orphan_rows_of_a_shard_killed_mid_write(faulty, suite, tmp_path, capsys):
    """A shard killed between renames: its last graph is in iterations and validation, not in
    summary.csv. Those rows are dropped with a warning; the merge equals merging the shard's
    finished part."""
    assert _run(suite, tmp_path, "s0", "--shard", "0/2") in (0, 1, 2)
    assert _run(suite, tmp_path, "s1", "--shard", "1/2") in (0, 1, 2)
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

"""compare reads both schema-v2 layouts of ROCm dnn-benchmarking's result file.

The fixtures in tests/data/dnnbench/ were written for these tests from the upstream format: the older
layout (``provider``, the plan's ``kernel``/``timing`` at the row's top level, ``cv``/``iqr_ms`` in the
stats, ``timing.backend``) and the newest (ROCm/dnn-benchmarking @ 03382e30
``src/dnn_benchmarking/reporting/suite_results.py``: ``runtime``, the plan in ``ootb`` beside ``oracle``
and ``oracle_error``, ``timing.timer`` and ``timing.samples``). Both hold the same numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.compare.dnnbench_input import dnnbench_label, dnnbench_rows

DATA = Path(__file__).resolve().parents[1] / "data" / "dnnbench"
OLDER, NEWEST = DATA / "older-layout.json", DATA / "newest-layout.json"


def _copy(source: Path, out: Path, edit) -> Path:   # a small in-place editor
    data = json.loads(source.read_text())
    edit(data)
    out.write_text(json.dumps(data))
    return out


def test_both_layouts_give_the_same_rows_without_reference_rows() -> None:
    label_old, old = dnnbench_rows(OLDER)
    label_new, new = dnnbench_rows(NEWEST)
    assert (label_old, label_new) == ("older-layout", "newest-layout")   # no run.json beside them: the stem
    assert old.to_dicts() == new.to_dicts()
    assert new.select("graph", "config", "status", "n", "median").rows() == [
        ("conv_fwd", "MIOPEN_ENGINE", "passed", 30, 0.5),
        ("layernorm", "MIOPEN_ENGINE", "passed", 30, 1.0),
        ("layernorm", "OTHER_ENGINE", "skipped", None, None)]   # ootb null: no statistics


def test_newest_layout_counts_samples_in_timing_when_the_stats_do_not(tmp_path: Path) -> None:
    def drop_n(data: dict) -> None:
        for graph in data["graphs"]:
            for row in graph["results"]:
                if row["ootb"]:
                    del row["ootb"]["kernel"]["n"]
    _, rows = dnnbench_rows(_copy(NEWEST, tmp_path / "no-n.json", drop_n))
    assert rows["n"].to_list() == [30, 30, None]


def test_compare_older_against_newest_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def slower_conv(data: dict) -> None:
        kernel = data["graphs"][0]["results"][0]["ootb"]["kernel"]
        for key in ("p25_ms", "median_ms", "p75_ms"):
            kernel[key] *= 1.5
    assert main(["compare", str(OLDER), str(NEWEST), "--format", "json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert (same["a"], same["b"]) == ("older-layout", "newest-layout")
    # rows in compare's display order (compare/result.py display_order): the skipped row's INCONCLUSIVE
    # (no statistics) needs more attention than the SAME rows, which follow by ratio, graph, config
    assert [(r["graph"], r["config"], r["ratio"], r["verdict"]) for r in same["rows"]] == [
        ("layernorm", "OTHER_ENGINE", None, "INCONCLUSIVE"), ("conv_fwd", "MIOPEN_ENGINE", 1.0, "SAME"),
        ("layernorm", "MIOPEN_ENGINE", 1.0, "SAME")]
    slow = _copy(NEWEST, tmp_path / "slow.json", slower_conv)
    assert main(["compare", str(OLDER), str(slow), "--format", "json"]) == 3
    verdicts = {r["graph"] + "/" + r["config"]: r["verdict"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert verdicts["conv_fwd/MIOPEN_ENGINE"] == "SLOWER" and verdicts["layernorm/MIOPEN_ENGINE"] == "SAME"


@pytest.mark.parametrize(("path", "value", "field"), [
    (("graphs", 0, "results", 0, "ootb", "kernel", "median_ms"), "fast",
     "graphs[0].results[0].ootb.kernel.median_ms: expected a number, got 'fast'"),
    (("graphs", 1, "results", 1, "ootb"), [1], "graphs[1].results[1].ootb: expected an object"),
    (("graphs", 0, "results"), {"a": 1}, "graphs[0].results: expected a list"),
    (("graphs", 1, "graph_name"), 7, "graphs[1].graph_name: expected a string, got 7"),
    # reliability issue item 5: every variant of a field of the wrong kind or size
    (("graphs",), {"a": 1}, "graphs: expected a list"),
    (("graphs",), 5, "graphs: expected a list"),
    (("graphs", 0), "g", "graphs[0]: expected an object"),
    (("graphs", 0, "results"), "x", "graphs[0].results: expected a list"),
    (("graphs", 0, "results", 0), 3, "graphs[0].results[0]: expected an object"),
    (("graphs", 0, "results", 0, "ootb", "kernel"), [1], "graphs[0].results[0].ootb.kernel: expected an object"),
    (("graphs", 0, "results", 0, "ootb", "kernel"), "k", "graphs[0].results[0].ootb.kernel: expected an object"),
    (("graphs", 0, "results", 0, "ootb", "timing"), 1, "graphs[0].results[0].ootb.timing: expected an object"),
    (("graphs", 0, "results", 0, "engine"), "eng", "graphs[0].results[0].engine: expected an object"),
    (("graphs", 0, "results", 0, "engine"), [1], "graphs[0].results[0].engine: expected an object"),
    (("graphs", 0, "results", 0, "engine", "name"), [1], "graphs[0].results[0].engine.name: expected a string"),
    (("graphs", 0, "results", 0, "verdict"), 1, "graphs[0].results[0].verdict: expected a string"),
    (("graphs", 0, "results", 0, "ootb", "kernel", "n"), "30", "graphs[0].results[0].ootb.kernel.n: expected an"),
    (("graphs", 0, "results", 0, "ootb", "kernel", "n"), 10**30, "graphs[0].results[0].ootb.kernel.n: expected a"),
    (("graphs", 0, "results", 0, "ootb", "kernel", "n"), -1, "graphs[0].results[0].ootb.kernel.n: expected a"),
    (("graphs", 0, "results", 0, "ootb", "kernel", "median_ms"), "0.5",
     "graphs[0].results[0].ootb.kernel.median_ms: expected a number"),
    (("graphs", 0, "results", 0, "ootb", "kernel", "median_ms"), 10**30,
     "graphs[0].results[0].ootb.kernel.median_ms: expected a time in ms"),
    (("graphs", 0, "results", 0, "ootb", "kernel", "p25_ms"), -0.5,
     "graphs[0].results[0].ootb.kernel.p25_ms: expected a time in ms"),
])
def test_a_malformed_field_is_one_line_naming_the_file_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], path: tuple, value: object, field: str) -> None:
    def put(data: dict) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    bad = _copy(NEWEST, tmp_path / "bad.json", put)
    code = main(["compare", str(OLDER), str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err and "Traceback" not in err
    assert f"{bad}: {field}" in err


def test_a_file_in_a_run_directory_is_labelled_by_its_run_id(tmp_path: Path) -> None:
    run = tmp_path / "some-folder"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "20260101-000000-abcdef"}))
    inside = _copy(NEWEST, run / "results.dnnbench.json", lambda data: None)
    assert dnnbench_label(inside) == "20260101-000000-abcdef"
    (run / "run.json").write_text("{not json")
    assert dnnbench_label(inside) == "results.dnnbench"   # unreadable run.json: the file's own name

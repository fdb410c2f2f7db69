"""``hipdnn-trace inspect``: per-graph facts, output forms, failures that do not stop it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from graph_samples import GRAPHS, as_json, conv_bias_relu, fixture_graph_files

from hipdnn_trace import backends
from hipdnn_trace.cli import main
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_file

CONV_FLOPS = 2 * 2 * 8 * 6 * 6 * 4 * 3 * 3   # N K OH OW C KH KW of conv_bias_relu()


@pytest.fixture
def conv_file(write_json) -> Path:
    return write_json(as_json(conv_bias_relu()), "conv_bias_relu.json")


def test_text_output_lists_everything(conv_file: Path, capsys) -> None:
    assert main(["inspect", str(conv_file)]) == 0
    out = capsys.readouterr().out
    graph_id = load_file(conv_file).graph_id
    assert out.startswith("conv_bias_relu\n")
    assert f"graph_id   {graph_id}" in out
    assert "ConvolutionFwd, Pointwise(add), Pointwise(relu_fwd)" in out
    assert "io float, compute float, intermediate float" in out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith("    ") and
            line.split()[0].isdigit()}
    assert rows["x"][2:4] == ["in", "float"] and rows["conv_y"][2] == "virtual" and rows["out"][2] == "out"
    assert "[2, 4, 6, 6]" in out and "[144, 36, 6, 1]" in out and "NCHW" in out
    total = CONV_FLOPS + 2 * (2 * 8 * 6 * 6)   # + one FLOP per element for add and relu
    assert f"{total / 1e3:.3g} kFLOP" in out
    assert "reference  can run" in out


def test_json_output(conv_file: Path, capsys) -> None:
    assert main(["inspect", "--json", str(conv_file)]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert info["ops"] == ["ConvolutionFwd", "Pointwise(add)", "Pointwise(relu_fwd)"]
    assert info["nodes"][0]["flops"] == CONV_FLOPS
    # bytes: non-virtual tensors only: x, w, bias, out (float32)
    assert info["bytes"] == 4 * (2 * 4 * 36 + 8 * 4 * 9 + 8 + 2 * 8 * 36)
    assert info["arithmetic_intensity"] == pytest.approx(info["flops"] / info["bytes"])
    roles = {t["name"]: t["role"] for t in info["tensors"]}
    assert roles == {"x": "in", "w": "in", "bias": "in", "conv_y": "virtual", "biased": "virtual", "out": "out"}
    ref = next(b for b in info["backends"] if b["name"] == "reference")
    assert ref["available"] and ref["supported"]
    assert {b["name"] for b in info["backends"]} == set(backends.names())


def test_quiet_is_one_line_per_graph(capsys) -> None:
    folder = GRAPHS / "matmul"
    expected = len(list(folder.glob("*.json")))
    assert main(["inspect", "-q", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == expected
    assert all("Matmul" in line and "runs on: " in line for line in lines)


def test_whole_graphs_folder_inspects(capsys) -> None:
    assert main(["inspect", "--quiet", str(GRAPHS)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and len(out.splitlines()) == len(list(GRAPHS.rglob("*.json")))


def test_value_and_unused_tensors(write_json, capsys) -> None:
    b = GraphBuilder("ln")
    b.tensor("spare", [3])
    x = b.tensor("x", [2, 4])
    b.layernorm(x, b.tensor("g", [1, 4]), epsilon=0.5)
    path = write_json(as_json(b.build()))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "value=0.5" in out and " unused " in out


def test_a_broken_graph_does_not_stop_the_others(conv_file: Path, write_json, capsys) -> None:
    broken = write_json(b'{"name": "x", "tensors": [', "broken.json")
    rc = main(["inspect", "-q", str(broken), str(conv_file)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.startswith("conv_bias_relu ")
    assert err.count("\n") == 1 and str(broken) in err and "invalid JSON" in err


def test_an_oversized_file_does_not_stop_the_others(conv_file: Path, tmp_path: Path, capsys) -> None:
    from hipdnn_trace.graph.load import MAX_FILE_BYTES

    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:      # sparse: refused before a byte is read
        fh.truncate(MAX_FILE_BYTES + 1)
    rc = main(["inspect", "-q", str(huge), str(conv_file)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.startswith("conv_bias_relu ")
    assert err.count("\n") == 1 and str(huge) in err and "are refused" in err


def test_json_output_reports_failures_too(conv_file: Path, write_json, capsys) -> None:
    broken = write_json({"name": 1}, "bad.json")
    assert main(["inspect", "--json", str(conv_file), str(broken)]) == 1
    infos = json.loads(capsys.readouterr().out)
    assert infos[0]["name"] == "conv_bias_relu"
    assert infos[1]["source"] == str(broken) and "$.name" in infos[1]["error"]


def test_missing_argument_path(tmp_path: Path, capsys) -> None:
    assert main(["inspect", str(tmp_path / "none.json")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_backend_that_fails_to_import_is_reported_with_stand_in_module(
        conv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A stand-in GPU backend module whose import fails (as a missing libamdhip64 would)."""
    (tmp_path / "standin_gpu_backend.py").write_text(
        "raise OSError('libamdhip64.so: cannot open shared object file')\n")
    (tmp_path / "standin_picky_backend.py").write_text(
        "from hipdnn_trace.backends.base import Support\n"
        "class Picky:\n"
        "    name = 'picky'\n"
        "    def available(self): return Support(True)\n"
        "    def check(self, graph): return Support(False, 'no convolutions here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(backends.REGISTRY, "standin", "standin_gpu_backend:Backend")
    monkeypatch.setitem(backends.REGISTRY, "picky", "standin_picky_backend:Picky")
    monkeypatch.setitem(backends.REGISTRY, "absent", "hipdnn_trace.backends.no_such_module:X")
    for name in ("standin", "picky", "absent"):
        backends._instances.pop(name, None)
    try:
        assert main(["inspect", str(conv_file)]) == 0
        out = capsys.readouterr().out
    finally:
        for name in ("standin", "picky", "absent"):
            backends._instances.pop(name, None)
        sys.modules.pop("standin_gpu_backend", None)
        sys.modules.pop("standin_picky_backend", None)
    assert "standin    not available: OSError: libamdhip64.so: cannot open shared object file" in out
    assert "picky      cannot run: no convolutions here" in out
    assert "absent     not available: backend 'absent' is not part of this build" in out


@pytest.mark.parametrize("path", fixture_graph_files(), ids=lambda p: p.name)
def test_upstream_fixtures_inspect(path: Path, capsys) -> None:
    assert main(["inspect", "-q", str(path)]) == 0
    assert capsys.readouterr().out.count("\n") == 1


def test_help_has_examples(capsys) -> None:
    assert main(["inspect", "--help"]) == 0
    assert "examples:" in capsys.readouterr().out


def _relu_graph(elements: int):
    from hipdnn_trace.graph.build import GraphBuilder

    b = GraphBuilder(f"relu_{elements}")
    b.pointwise("relu_fwd", b.tensor("x", [elements]), name="relu", out="y")
    return b.build()


def test_inspect_gives_the_host_memory_refusal_run_gives(steady_memory: None) -> None:
    """A graph whose fp32 tensors cannot fit in this machine's memory: inspect's verdict is run's error."""
    from hipdnn_trace.backends.reference import available_memory_bytes
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.graph_run import RunSettings, run_graph
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.commands.inspect import _Backends
    from hipdnn_trace.graph.sources import GraphSource
    from hipdnn_trace.graph.write import dumps
    from hipdnn_trace.markers import Markers

    graph = _relu_graph(2**35)   # 2 x 128 GiB of fp32 host tensors, refused before anything is allocated
    have = available_memory_bytes()
    if have is None or have > 2**39:
        pytest.skip("this machine could hold the graph")
    verdict = next(v for v in _Backends().verdicts(graph) if v.name == "reference")
    assert verdict.supported is False and "GiB of host memory for inputs and outputs" in verdict.supported_reason
    data = dumps(graph).encode()
    run = run_graph(GraphSource("huge.json", lambda: data), [Config("reference", "reference")],
                    RunSettings(loop=LoopSettings(warmup=0, iters=1)), Markers())
    assert run.status == "error" and run.error == f"huge.json: {verdict.supported_reason}"


def test_inspect_gives_the_reference_memory_refusal_prepare_gives() -> None:
    """Host tensors fit, the float64 evaluation does not: inspect says the reference cannot run, with
    prepare's words."""
    from hipdnn_trace.backends.base import RunOptions
    from hipdnn_trace.backends.reference import ReferenceBackend, available_memory_bytes, needed_memory_bytes
    from hipdnn_trace.commands.inspect import _Backends
    from hipdnn_trace.errors import UnsupportedError

    have = available_memory_bytes()
    if have is None:
        pytest.skip("no /proc/meminfo")
    elements = have // 32          # fp32 host tensors (16 B/element) take half of what is free,
    graph = _relu_graph(elements)  # float64 copies (48 B/element) one and a half times it
    if not 16 * elements <= have < needed_memory_bytes(graph):
        pytest.skip("no size between the two limits on this machine")
    verdict = next(v for v in _Backends().verdicts(graph) if v.name == "reference")
    assert verdict.supported is False and "float64" in verdict.supported_reason
    with pytest.raises(UnsupportedError) as exc:
        ReferenceBackend().prepare(graph, None, RunOptions())
    assert str(exc.value).split(", ")[0] == verdict.supported_reason.split(", ")[0]


# --------------------------------------------------- inspect and run share one verdict (issue 25, item 6)

def _inspect_json(path: Path, capsys, *extra: str) -> dict:
    capsys.readouterr()
    assert main(["inspect", "--json", *extra, str(path)]) == 0
    [info] = json.loads(capsys.readouterr().out)
    return info


def _reference_verdict(info: dict) -> dict:
    return next(b for b in info["backends"] if b["name"] == "reference")


def _run_rows(path: Path, tmp_path: Path, capsys, *extra: str) -> tuple[list[dict], str]:
    """(summary rows, console output) of ``run`` on the reference backend."""
    from hipdnn_trace.results.rundir import load_run

    capsys.readouterr()
    out = tmp_path / "runs"
    main(["run", str(path), "--iters", "3", "--warmup", "1", "--out", str(out), "--run-id", path.stem, *extra])
    text = capsys.readouterr().out
    return load_run(out / path.stem).summary.to_dicts(), text


def _layernorm_inference_asking_for_mean() -> dict:
    b = GraphBuilder("ln_inference_mean")
    b.layernorm(b.tensor("x", [4, 8, 16]), b.tensor("scale", [1, 1, 16]), b.tensor("bias", [1, 1, 16]))
    doc = b.to_json()
    doc["nodes"][0]["attributes"]["forward_phase"] = "INFERENCE"   # keeps its mean / inv_variance outputs
    return doc


def test_a_layernorm_asked_for_statistics_in_inference_is_refused_by_both(write_json, tmp_path, capsys) -> None:
    path = write_json(_layernorm_inference_asking_for_mean(), "ln_inference_mean.json")
    info = _inspect_json(path, capsys)
    verdicts = {b["name"]: b for b in info["backends"]}
    reason = verdicts["reference"]["supported_reason"]
    assert verdicts["reference"]["supported"] is False and "INFERENCE writes no mean or inv_variance" in reason
    assert verdicts["torch"]["supported"] in (False, None)      # every backend: the rule is the graph's
    [row], _ = _run_rows(path, tmp_path, capsys)
    assert row["status"] == "unsupported" and row["error"] == reason


def test_a_graph_over_the_reference_time_limit_is_refused_by_both(write_json, tmp_path, capsys) -> None:
    b = GraphBuilder("matmul_2gflop")
    b.matmul(b.tensor("a", [1, 1024, 1024]), b.tensor("b", [1, 1024, 1024]), out="c")
    path = write_json(as_json(b.build()), "matmul_2gflop.json")
    limit = ["--max-reference-seconds", "0.0001"]          # 2.1 GFLOP: no CPU does it in 0.1 ms
    verdict = _reference_verdict(_inspect_json(path, capsys, *limit))
    assert verdict["supported"] is False and "over the --max-reference-seconds limit of 0.0001 s" \
        in verdict["supported_reason"]
    [row], _ = _run_rows(path, tmp_path, capsys, *limit)
    assert row["status"] == "error" and row["error"] == f"{path}: {verdict['supported_reason']}"
    assert _reference_verdict(_inspect_json(path, capsys))["supported"] is True   # run's default limit


@pytest.mark.parametrize("build, words", [
    (lambda b: b.pointwise("relu_fwd", b.tensor("x", [4, 16]), relu_lower_clip=5.0, relu_upper_clip=1.0, out="y"),
     "relu_lower_clip 5 > relu_upper_clip 1: the clip range is empty"),
    (lambda b: b.layernorm(b.tensor("x", [4, 16]), b.tensor("s", [1, 16]), b.tensor("c", [1, 16]),
                           epsilon=-1.0, phase="INFERENCE"),
     "epsilon -1 is negative"),
])
def test_dubious_attributes_get_the_same_note_in_both(build, words, write_json, tmp_path, capsys) -> None:
    b = GraphBuilder("dubious")
    build(b)
    path = write_json(b.to_json(), "dubious.json")
    info = _inspect_json(path, capsys)
    [note] = info["notes"]
    assert words in note and _reference_verdict(info)["supported"] is True   # a note, not a refusal
    _, console = _run_rows(path, tmp_path, capsys)
    assert f"note: {note}" in console


def test_plain_attributes_get_no_note(conv_file: Path, capsys) -> None:
    assert _inspect_json(conv_file, capsys)["notes"] == []

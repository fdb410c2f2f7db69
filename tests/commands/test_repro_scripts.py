"""Standalone library programs of repro bundles: torch's is the torch backend's own computation (run
here on the CPU and compared bit for bit), cuDNN's and hipDNN's compile and make the plan's calls; a
``cuda`` test runs the cuDNN one where a GPU and the frontend exist."""

from __future__ import annotations

import importlib.util
import json
import py_compile
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.commands.repro_scripts import library_script
from hipdnn_trace.graph.load import load_bytes, load_file
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.results.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = ROOT / "graphs"
META = {"seed": 0, "gpu": None, "argv": ["hipdnn-trace", "run", "g.json"], "configs": []}

torch = pytest.importorskip("torch")


def _write(tmp_path: Path, backend: str, graph: Graph) -> tuple[Path, str]:
    name, text = library_script(META, {"backend": backend, "status": "error", "config": backend}, graph, "t")
    path = tmp_path / name
    path.write_text(text)
    py_compile.compile(str(path), doraise=True)
    return path, text


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["pointwise/gelu_fp16.json", "fused/matmul_bias_gelu_bf16.json",
                                  "conv/conv_fwd_1x1_nhwc_fp16.json", "attention/sdpa_mha_fp16.json"])
def test_torch_program_runs_on_the_cpu_and_computes_what_the_torch_backend_does(tmp_path: Path, name: str) -> None:
    from hipdnn_trace.backends.torch_script import _runner

    graph = load_file(GRAPHS / name)
    path, _ = _write(tmp_path, "torch", graph)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("executed"), done.stderr
    program = _module(path)
    gen = torch.Generator().manual_seed(0)
    cpu = torch.device("cpu")
    inputs = [program.make(dims, strides, dtype, cpu, gen) for _, dims, strides, dtype in program.INPUTS]
    ours = program.Repro()(*inputs)
    theirs = _runner(graph, torch.device("cpu"), {})(*inputs)
    assert len(ours) == len(theirs) == len(graph.output_tensors)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_a_torch_error_row_gets_a_program_that_raises_the_same_error(tmp_path: Path) -> None:
    data = json.loads((GRAPHS / "conv" / "conv_fwd_1x1_nhwc_fp32.json").read_text())
    for t in data["tensors"]:
        if t["name"] in ("x", "w"):
            t["data_type"] = "fp8_e4m3"   # torch has no CPU convolution of fp8 (2.x)
    data["name"] = "conv_fp8"
    graph = tmp_path / "conv_fp8.json"
    graph.write_text(json.dumps(data))
    main(["run", str(graph), "--backend", "torch", "-w", "0", "-i", "1", "--no-trace", "-q",
          "--out", str(tmp_path / "runs"), "--run-id", "r"])
    row = load_run(tmp_path / "runs" / "r").summary.to_dicts()[0]
    if row["status"] != "error":
        pytest.skip(f"this torch runs an fp8 convolution on the CPU ({row['status']})")
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    program = tmp_path / "b" / "conv_fp8" / "repro_torch.py"
    assert "import hipdnn_trace" not in program.read_text()
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert row["error"].split(": ", 2)[-1] in done.stderr   # e.g. "slow_conv2d_cpu" not implemented for ...


@pytest.mark.parametrize("name, method", [
    ("conv/conv_fwd_1x1_nhwc_fp16.json", "conv_fprop"), ("conv/conv_dgrad_nchw_fp16.json", "conv_dgrad"),
    ("matmul/matmul_batched_fp16.json", "matmul"), ("fused/matmul_bias_gelu_bf16.json", "gelu"),
    ("attention/sdpa_mha_fp16.json", "sdpa"),
])
def test_cudnn_program_compiles_and_makes_the_plans_calls(tmp_path: Path, name: str, method: str) -> None:
    from hipdnn_trace.backends.cudnn_graph import plan

    graph = load_file(GRAPHS / name)
    _, text = _write(tmp_path, "cudnn", graph)
    assert f"graph.{method}(" in text and "import hipdnn_trace" not in text
    translation = plan(graph)
    for op in translation.ops:
        assert f"graph.{op.method}(name={op.name!r}" in text
    for t in translation.inputs:   # the plan's geometry (low-rank tensors lifted, as cuDNN wants)
        assert f"name={t.name!r}, dim={list(t.dims)}, stride={list(t.strides)}" in text


def test_hipdnn_program_compiles_and_hands_over_the_graph(tmp_path: Path) -> None:
    graph = load_file(GRAPHS / "conv" / "conv_fwd_1x1_nhwc_fp16.json")
    path, text = _write(tmp_path, "hipdnn", graph)
    assert "import hipdnn_frontend" in text and "import hipdnn_trace" not in text
    source = path.read_text()
    start = source.index("GRAPH_JSON = ") + len("GRAPH_JSON = ")
    handed = eval(source[start:source.index("\n", start)])   # noqa: S307 - a string literal we wrote
    assert load_bytes(handed.encode(), "handed").graph_id == graph.graph_id


def test_no_program_for_the_reference_backend() -> None:
    from hipdnn_trace.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="no standalone program"):
        library_script(META, {"backend": "reference", "status": "error"}, load_file(GRAPHS / "pointwise" /
                                                                                     "gelu_fp16.json"), "t")


@pytest.mark.cuda
def test_cudnn_program_runs_on_a_gpu(tmp_path: Path) -> None:
    pytest.importorskip("cudnn")
    path, _ = _write(tmp_path, "cudnn", load_file(GRAPHS / "conv" / "conv_fwd_1x1_nhwc_fp16.json"))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("executed"), done.stderr


def test_hipdnn_program_runs_against_the_stand_in_bindings(tmp_path: Path) -> None:
    """STAND-IN hipdnn_frontend (tests/support/stand_ins: no AMD GPU here): the program's call sequence,
    buffers and variant pack are accepted and the graph 'executes' (on the stand-in's float64 host)."""
    import os

    path, _ = _write(tmp_path, "hipdnn", load_file(GRAPHS / "conv" / "conv_fwd_1x1_nhwc_fp16.json"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "support" / "stand_ins"), str(ROOT)])
    env["STAND_IN_HIPDNN_LOG"] = str(tmp_path / "calls.jsonl")
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("executed"), done.stderr
    calls = [json.loads(line)[0] for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls[:8] == ["Handle", "Graph", "Graph.from_json", "Graph.validate", "Graph.build_operation_graph",
                         "Graph.create_execution_plans", "Graph.check_support", "Graph.build_plans"]
    assert calls.count("DeviceBuffer") == 4 and calls[-2:] == ["Graph.execute", "hip_device_synchronize"]


class _StandInTensor:
    """STAND-IN cudnn tensor: remembers its declared or set geometry; other setters chain."""

    def __init__(self, **kw: object) -> None:
        self.kw = dict(kw)

    def set_dim(self, dims: list[int]) -> _StandInTensor:
        self.kw["dim"] = dims
        return self

    def set_stride(self, strides: list[int]) -> _StandInTensor:
        self.kw["stride"] = strides
        return self

    def __getattr__(self, name: str) -> object:
        return lambda *a, **k: self


class _StandInGraph:
    """STAND-IN cudnn.pygraph: records every op call and the execute's variant pack."""

    def __init__(self, log: list[tuple[str, dict]]) -> None:
        self.log = log

    def tensor(self, **kw: object) -> _StandInTensor:
        return _StandInTensor(**kw)

    def get_execution_plan_count(self) -> int:
        return 2

    def get_plan_name_at_index(self, index: int) -> str:
        return f"plan{index}"

    def get_workspace_size_plan_at_index(self, index: int) -> int:
        return 16

    def execute(self, pack: dict, workspace: object, handle: object = None) -> None:
        self.log.append(("execute", pack))

    def __getattr__(self, method: str) -> object:
        def call(*a: object, **kw: object) -> list[_StandInTensor]:
            self.log.append((method, kw))
            return [_StandInTensor() for _ in range(5)]
        return call


class _Members:
    """STAND-IN enum family: any member is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


#: build steps of the program, not ops of the plan
BUILD_STEPS = ("validate", "build_operation_graph", "create_execution_plans", "deselect_numeric_notes",
               "check_support", "build_plan_at_index")


@pytest.mark.parametrize("name", ["norm/layernorm_fp16.json", "fused/matmul_bias_gelu_bf16.json",
                                  "conv/conv_fwd_1x1_nhwc_fp32.json"])
def test_cudnn_program_runs_its_plan_against_a_stand_in_frontend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 name: str) -> None:
    """STAND-IN cudnn module, CPU tensors for "cuda" (no GPU here): the program makes the plan's op calls in
    order with its tensors and attributes, and hands execute one buffer of the declared geometry each."""
    from types import SimpleNamespace

    from hipdnn_trace.backends.cudnn_graph import plan

    graph = load_file(GRAPHS / name)
    translation = plan(graph)
    path, _ = _write(tmp_path, "cudnn", graph)
    log: list[tuple[str, dict]] = []
    stand_in = SimpleNamespace(pygraph=lambda **kw: _StandInGraph(log), create_handle=lambda: "handle",
                               backend_version=lambda: 0)
    for family in ("data_type", "heur_mode", "numerical_note",
                   *(v.family for op in translation.ops for v in op.attrs.values() if hasattr(v, "family"))):
        setattr(stand_in, family, _Members())
    monkeypatch.setitem(sys.modules, "cudnn", stand_in)
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **k: real_empty(*a, **{**k, "device": "cpu"}))
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    program = _module(path)
    monkeypatch.setattr(program, "empty", lambda dims, strides, dtype: torch.empty_strided(dims, strides, dtype=dtype))
    assert program.main() == 0
    ops = [(m, kw) for m, kw in log if m != "execute" and m not in BUILD_STEPS]
    assert [m for m, _ in ops] == [op.method for op in translation.ops]
    for (_, kw), op in zip(ops, translation.ops):
        assert set(kw) >= {k for k, v in op.tensors.items() if v is not None} | set(op.attrs) | {"name"}
    (pack,) = [kw for m, kw in log if m == "execute"]
    assert len(pack) == len(translation.inputs) + sum(1 for o in translation.outputs if not o.virtual)
    for tensor, buffer in pack.items():
        assert list(buffer.shape) == list(tensor.kw["dim"])
        if not tensor.kw.get("is_pass_by_value"):
            assert list(buffer.stride()) == list(tensor.kw["stride"])

"""dnn-providers integration-test bundles and template sweeps (graph/bundles.py, graph/sweeps.py).

Every bundle here is written by the test in upstream's layout, as ROCm/rocm-libraries lays them out
(``dnn-providers/integration-tests/integration_test_bundles/README.md`` at 508844c: ``{Name}/{Name}.json``,
``{Name}.meta.json``, ``{Name}.tensors.dvc``, ``{Name}.tensor{uid}.bin``; sweeps as in
``quick/Pointwise/Default/{graph.template.json,sweep.json}`` at 6495721 / 2e0bbd0). Golden outputs come
from an independent computation (torch's float64 SDPA, numpy's relu), never from our reference.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hipdnn_trace.bench import graph_run
from hipdnn_trace.bench.bundle_support import check_support
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rows import summary_rows
from hipdnn_trace.results.schemas import SUMMARY
from tests.support.graph_dicts import sdpa_generator

torch = pytest.importorskip("torch")

SEED, RANGE = 42, [-1.0, 1.0]
META = {"generator": "generate_sdpa_fwd_golden.py", "reference_source": "PyTorch (test)", "seed": SEED,
        "input_range": RANGE, "deterministic": True, "direction": "forward"}


def _sdpa_bundle(root: Path, *, bins: str = "all", meta: dict | None = None, causal: bool | None = None,
                 runtime_scale: float | None = None) -> Path:
    """``root/Small/`` as generate_sdpa_fwd_golden.py (dnn-providers reference_data_scripts at 3005a4b)
    writes it: Q, K, V uniform in RANGE from one seeded CPU generator, O from SDPA (here in float64).
    ``causal`` given: the generator's own graph JSON; else one from our builder."""
    folder = root / "quick" / "SdpaFwd" / "bhsd" / "fp16" / "tiny" / "Small"
    folder.mkdir(parents=True)
    dims = [1, 2, 16, 32]
    if causal is None:
        b = GraphBuilder("", io="half")
        q, k, v = (b.tensor(n, dims) for n in ("Q", "K", "V"))
        b.sdpa(q, k, v, scale=1 / math.sqrt(32))
        graph = b.to_json()
    else:
        graph = sdpa_generator(dims, causal)
    if runtime_scale is not None:   # generate_sdpa_runtime_scale_test_bundle.py's wiring (@ 8efc596): uid 4
        graph["nodes"][0]["inputs"]["scale_tensor_uid"] = 4
        graph["nodes"][0]["attributes"]["attn_scale_value"] = None
        graph["tensors"].append({"uid": 4, "name": "scale", "dims": [1], "strides": [1], "data_type": "float",
                                 "virtual": False, "is_runtime_pass_by_value": True})
    (folder / "Small.json").write_text(json.dumps(graph, indent=4))
    (folder / "Small.meta.json").write_text(json.dumps(META if meta is None else meta, indent=4))
    (folder / "Small.tensors.dvc").write_text("outs:\n" + "".join(f"- path: Small.tensor{u}.bin\n" for u in range(4)))
    rng = torch.Generator().manual_seed(SEED)
    qkv = [torch.empty(dims, dtype=torch.float16).uniform_(*RANGE, generator=rng) for _ in range(3)]
    scale = 1 / math.sqrt(32) if runtime_scale is None else runtime_scale
    o = torch.nn.functional.scaled_dot_product_attention(*(t.double() for t in qkv), scale=scale,
                                                         is_causal=bool(causal))
    uids = {t["name"]: t["uid"] for t in graph["tensors"]}
    out_uid = next(t["uid"] for t in graph["tensors"] if t["name"] not in ("Q", "K", "V"))
    written = {uids["Q"]: qkv[0], uids["K"]: qkv[1], uids["V"]: qkv[2], out_uid: o.half()}
    for uid, t in written.items():
        if bins == "all" or (bins == "outputs" and uid == out_uid):
            (folder / f"Small.tensor{uid}.bin").write_bytes(t.contiguous().view(torch.uint8).numpy().tobytes())
    return folder


def _run(source, **settings):
    return graph_run.run_graph(source, [Config("reference", "reference")],
                               graph_run.RunSettings(loop=LoopSettings(warmup=0, iters=1), **settings), Markers())


def _verdicts(run) -> dict[str, bool]:
    return {v.against: v.passed for v in run.validation}


def test_sdpa_bundle_validates_against_its_golden_tensors(tmp_path: Path) -> None:
    folder = _sdpa_bundle(tmp_path)
    [source] = expand([str(tmp_path)])          # the meta and the pointer are not graphs
    assert source.bundle is not None and source.bundle.dvc == folder / "Small.tensors.dvc"
    run = _run(source)
    assert run.status != "error", run.error
    assert _verdicts(run) == {"golden": True, "reference": True}, run.validation
    assert any("inputs from the bundle's tensor files" in n for n in run.notes), run.notes
    [row] = summary_rows("r", run)
    assert row["golden"] == "used" and set(row) <= set(SUMMARY)


def test_a_corrupted_golden_output_fails(tmp_path: Path) -> None:
    folder = _sdpa_bundle(tmp_path)
    graph = json.loads((folder / "Small.json").read_text())
    out = folder / f"Small.tensor{graph['nodes'][0]['outputs']['o_tensor_uid']}.bin"
    values = np.frombuffer(out.read_bytes(), dtype=np.float16).copy()
    values[::7] += np.float16(0.25)
    out.write_bytes(values.tobytes())
    run = _run(expand([str(folder)])[0])
    assert _verdicts(run) == {"golden": False, "reference": True}, run.validation


def test_meta_recipe_remakes_the_inputs_the_golden_outputs_need(tmp_path: Path) -> None:
    """Only O's file is there: Q, K, V are made as the generator makes them (seed, range), and the
    golden output still matches; with another seed in the meta it does not."""
    _sdpa_bundle(tmp_path / "a", bins="outputs")
    run = _run(expand([str(tmp_path / "a")])[0])
    assert _verdicts(run) == {"golden": True, "reference": True}, (run.validation, run.notes)
    assert any("made as generate_sdpa_fwd_golden.py makes them (seed 42" in n for n in run.notes), run.notes
    _sdpa_bundle(tmp_path / "b", bins="outputs", meta={**META, "seed": 7})
    assert _verdicts(_run(expand([str(tmp_path / "b")])[0]))["golden"] is False


def test_unknown_generator_inputs_cannot_be_remade_so_golden_is_set_aside(tmp_path: Path) -> None:
    _sdpa_bundle(tmp_path, bins="outputs", meta={**META, "generator": "capture-bundles"})
    run = _run(expand([str(tmp_path)])[0])
    assert _verdicts(run) == {"reference": True}
    assert any("golden: unusable" in n for n in run.notes) and any("capture-bundles" in n for n in run.notes)
    assert run.golden == "unusable"


def test_dvc_only_bundle_says_so_and_validates_against_the_reference(tmp_path: Path) -> None:
    folder = _sdpa_bundle(tmp_path, bins="none")
    run = _run(expand([str(tmp_path)])[0])
    assert _verdicts(run) == {"reference": True}, run.validation
    note = next(n for n in run.notes if n.startswith("golden: dvc-only"))
    assert summary_rows("r", run)[0]["golden"] == "dvc-only"
    assert str(folder / "Small.tensors.dvc") in note and "float64 reference" in note


@pytest.mark.parametrize("meta,field", [({**META, "seed": "42"}, "$.seed"),
                                        ({**META, "input_range": [1, -1]}, "$.input_range"),
                                        ([1, 2], "$")])
def test_bad_meta_is_one_error_row_naming_file_and_field(tmp_path: Path, meta, field: str) -> None:
    folder = _sdpa_bundle(tmp_path, bins="none", meta=meta)
    [source] = expand([str(tmp_path)])
    with pytest.raises(GraphError) as err:
        source.read()
    assert str(err.value).startswith(f"{folder / 'Small.meta.json'}: {field}:"), err.value
    assert "\n" not in str(err.value)
    assert _run(source).status == "error"


# ------------------------------------------------------------------ sweeps

TEMPLATE = {   # quick/Pointwise/Default/graph.template.json's shape (ROCm/rocm-libraries at 6495721)
    "compute_data_type": "float", "intermediate_data_type": "${case.intermediate_data_type}",
    "io_data_type": "${case.io_data_type}", "name": "PointwiseReluForwardTest",
    "nodes": [{"compute_data_type": "float", "name": "Pointwise_0", "type": "PointwiseAttributes",
               "inputs": {"in_0_tensor_uid": 0, "in_1_tensor_uid": None, "in_2_tensor_uid": None,
                          "operation": "relu_fwd"},
               "outputs": {"out_0_tensor_uid": 1}}],
    "tensors": [{"data_type": "${case.data_type}", "dims": "${case.dims}", "name": n, "strides": "${case.strides}",
                 "uid": u, "virtual": False} for u, n in ((0, "x"), (1, "Pointwise_0::OUT_0"))],
}
SHAPES = {"2_4_8_8_fp32_nchw": ([2, 4, 8, 8], "float"), "1_16_4_4_fp16_nchw": ([1, 16, 4, 4], "half"),
          "3_2_5_fp32": ([3, 2, 5], "float")}


def _strides(dims: list[int]) -> list[int]:
    return [int(np.prod(dims[i + 1:])) for i in range(len(dims))]


def _case(cid: str, dims: list[int], dt: str, golden: bool = False) -> dict:
    tensors = [{"uid": u, "dims": dims, "strides": _strides(dims), "data_type": dt} for u in (0, 1)]
    case = {"id": cid, "values": {"intermediate_data_type": dt, "io_data_type": dt, "tensors": tensors},
            "metadata": {"format_version": 1, "generator": "test", "reference_source": "numpy", "seed": 1}}
    if golden:
        case["golden"] = {"path": f"golden/{cid}/tensors.dvc"}
    return case


def _sweep(root: Path, cases: list[dict], template: dict | None = None) -> Path:
    folder = root / "quick" / "Pointwise" / "Default"
    folder.mkdir(parents=True)
    (folder / "graph.template.json").write_text(json.dumps(TEMPLATE if template is None else template))
    (folder / "sweep.json").write_text(json.dumps({"version": 1, "cases": cases}))
    return folder


def test_sweep_of_three_cases_expands_to_three_named_graphs_that_run(tmp_path: Path) -> None:
    folder = _sweep(tmp_path, [_case(c, d, t) for c, (d, t) in SHAPES.items()])
    sources = expand([str(tmp_path)])
    assert [s.name for s in sources] == [f"{folder / 'sweep.json'}#{c}" for c in SHAPES]
    for source, (cid, (dims, dt)) in zip(sources, SHAPES.items(), strict=True):
        run = _run(source)
        assert run.status != "error", run.error
        assert run.name == f"quick_Pointwise_Default.{cid}"
        assert run.graph is not None and list(run.graph.tensors[0].dims) == dims
        assert run.graph.tensors[1].data_type == dt
        assert _verdicts(run) == {"reference": True}
    assert [s.name for s in expand([str(folder / "sweep.json")])] == [s.name for s in sources]


def test_sweep_case_golden_tensors_are_the_target(tmp_path: Path) -> None:
    folder = _sweep(tmp_path, [_case("small_fp32", [2, 3, 4], "float", golden=True),
                               _case("pulled_later", [2, 3], "float", golden=True)])
    gold = folder / "golden" / "small_fp32"
    gold.mkdir(parents=True)
    (gold / "tensors.dvc").write_text("outs:\n- path: tensor0.bin\n- path: tensor1.bin\n")
    (folder / "golden" / "pulled_later").mkdir()
    (folder / "golden" / "pulled_later" / "tensors.dvc").write_text("outs:\n- path: tensor0.bin\n")
    x = np.random.default_rng(3).uniform(-2, 2, [2, 3, 4]).astype("<f4")
    (gold / "tensor0.bin").write_bytes(x.tobytes())
    (gold / "tensor1.bin").write_bytes(np.maximum(x, 0).astype("<f4").tobytes())
    first, second = (_run(s) for s in expand([str(folder)]))
    assert _verdicts(first) == {"golden": True, "reference": True}, first.validation
    assert any(n.startswith("golden: dvc-only") for n in second.notes), second.notes
    (gold / "tensor1.bin").write_bytes(np.abs(x).astype("<f4").tobytes())    # wrong golden: relu is not abs
    assert _verdicts(_run(expand([str(folder)])[0]))["golden"] is False


@pytest.mark.parametrize("change,words", [
    (lambda cases, t: cases[0].update(id=""), "$.cases[0].id: '': must be a non-empty string"),
    (lambda cases, t: cases[1].update(id=cases[0]["id"]), "$.cases[1].id: duplicate case id"),
])
def test_a_sweep_that_cannot_be_read_is_one_error_naming_file_and_field(tmp_path: Path, change, words: str) -> None:
    """A bad or repeated case id aborts the whole sweep upstream (file-formats.md, "Where each format is
    enforced"): one error row."""
    cases = [_case(c, d, t) for c, (d, t) in SHAPES.items()]
    template = json.loads(json.dumps(TEMPLATE))
    change(cases, template)
    folder = _sweep(tmp_path, cases, template)
    [source] = expand([str(tmp_path)])
    assert source.name == str(folder / "sweep.json")
    with pytest.raises(GraphError) as err:
        source.read()
    assert words in str(err.value) and "\n" not in str(err.value), err.value
    assert _run(source).status == "error"


@pytest.mark.parametrize("change,field,problem", [
    (lambda case, t: case["values"]["tensors"][0].pop("dims"), "$.cases[1].values.tensors[uid=0].dims", "missing"),
    (lambda case, t: case["values"].pop("io_data_type"), "$.cases[1].values.io_data_type", "missing"),
    (lambda case, t: case["values"]["tensors"].pop(), "$.cases[1].values.tensors[uid=1].data_type", "missing"),
    (lambda case, t: case["values"]["tensors"].append({"uid": 9, "dims": [1]}), "$.cases[1].values.tensors",
     "uid(s) [9] are not tensors"),
    (lambda case, t: t.update(name="x${case.name}"), "graph.template.json: $.name", "a placeholder must be"),
    (lambda case, t: t.update(tensors=[]), "graph.template.json: $.tensors", "must be a non-empty list"),
    (lambda case, t: case.update(golden={"path": "golden/x.bin"}), "$.cases[1].golden.path", "must name"),
    (lambda case, t: case.pop("metadata"), "$.cases[1].metadata", "missing (dnn-providers' harness drops"),
    (lambda case, t: case.update(tensor_patches=[{"uid": 7, "set": {}}]), "$.cases[1].tensor_patches[0].uid",
     "7 is not a tensor"),
])
def test_a_case_that_cannot_be_expanded_is_its_own_error_row(tmp_path: Path, change, field: str,
                                                             problem: str) -> None:
    """Upstream drops such a case and registers the others (IntegrationTestBundle.hpp); here it is one error
    row naming the file and field, and the other cases run (a template's problem is every case's)."""
    cases = [_case(c, d, t) for c, (d, t) in SHAPES.items()]
    template = json.loads(json.dumps(TEMPLATE))
    change(cases[1], template)
    folder = _sweep(tmp_path, cases, template)
    sources = expand([str(tmp_path)])
    assert [s.name for s in sources] == [f"{folder / 'sweep.json'}#{c}" for c in SHAPES]
    with pytest.raises(GraphError) as err:
        sources[1].read()
    message = str(err.value)
    assert field in message and problem in message and "\n" not in message, message
    assert _run(sources[1]).status == "error"
    others = [_run(s).status for s in (sources[0], sources[2])]
    assert others == (["error", "error"] if "template" in field else ["ok", "ok"]), others


def test_placeholders_resolve_as_the_harness_resolves_them(tmp_path: Path) -> None:
    """IntegrationTestBundle.hpp ``resolvePlaceholder``: inside a tensor, the tensor's own entry first, then
    the case-wide values, dotted paths into nested objects; then ``tensor_patches`` set, then remove."""
    template = json.loads(json.dumps(TEMPLATE))
    template["tensors"][0]["name"] = "${case.label}"        # per-tensor for uid 0, case-wide for uid 1
    template["tensors"][1]["name"] = "${case.label}"
    template["name"] = "${case.names.graph}"                 # a dotted path
    case = _case("dotted", [2, 3], "float")
    case["values"]["tensors"][0]["label"] = "own_x"
    case["values"].update(label="shared", names={"graph": "from_a_nested_value"})
    case["tensor_patches"] = [{"uid": 1, "set": {"name": "patched_y", "virtual": False}, "remove": ["label"]}]
    _sweep(tmp_path, [case], template)
    [source] = expand([str(tmp_path)])
    graph = json.loads(source.read())
    assert [t["name"] for t in graph["tensors"]] == ["own_x", "patched_y"]
    assert graph["name"] == "quick_Pointwise_Default.dotted"   # the test's name wins over the template's


def test_sweep_missing_its_template_names_the_missing_file(tmp_path: Path) -> None:
    folder = _sweep(tmp_path, [_case("a", [2], "float")])
    (folder / "graph.template.json").unlink()
    [source] = expand([str(tmp_path)])
    with pytest.raises(GraphError, match="graph.template.json: missing"):
        source.read()


def test_our_own_saved_bundles_are_not_upstream_bundles(tmp_path: Path) -> None:
    """A folder of --save-tensors bundles (with .sha256 manifests) runs as plain graphs, as before."""
    from hipdnn_trace.bench.inputs import make_inputs
    from hipdnn_trace.graph import golden

    b = GraphBuilder("relu")
    x = b.tensor("x", [4])
    b.pointwise("relu_fwd", x)
    graph = b.build()
    ins = make_inputs(graph, 0)
    golden.write_bundle(tmp_path, graph, {**ins, graph.output_tensors[0].uid: np.maximum(ins[x.uid], 0)})
    [source] = expand([str(tmp_path)])
    assert source.bundle is None


# ------------------------------------------------------------------ support claims

SUPPORT = {"claims": {"MIOPEN_ENGINE": {"gfx942": ["linux"], "gfx1151": ["windows"]}}, "version": 1}


def _hipdnn_row(status: str, error: str | None = None):
    from hipdnn_trace.bench.records import ConfigRun, GraphRun

    run = GraphRun(source="s", name="n")
    run.configs.append(ConfigRun(config=Config("hipdnn", "hipdnn"), status=status, error=error))
    return run


def test_bundle_support_claims_are_recorded_beside_the_verdicts(tmp_path: Path) -> None:
    """Single-graph ``{Name}.support.json`` as MIOpen.support.json (@ e59c9d4) writes it."""
    folder = _sdpa_bundle(tmp_path)
    (folder / "Small.support.json").write_text(json.dumps(SUPPORT))
    [source] = expand([str(tmp_path)])       # the support file is no graph
    assert source.bundle.support == (("MIOPEN_ENGINE", "gfx1151", "windows"), ("MIOPEN_ENGINE", "gfx942", "linux"))
    run = _run(source)
    assert any(n.startswith("support: ") and "MIOPEN_ENGINE on gfx1151/windows, gfx942/linux" in n
               for n in run.notes), run.notes


def test_support_disagreements_with_a_stand_in_amd_arch(tmp_path: Path) -> None:
    """No AMD GPU here: the machine's arch is handed in (a stand-in for ROCm torch's gcnArchName)."""
    folder = _sdpa_bundle(tmp_path)
    (folder / "Small.support.json").write_text(json.dumps(SUPPORT))
    ref = expand([str(tmp_path)])[0].bundle
    refused = _hipdnn_row("unsupported", "no engine")
    check_support(refused, ref, "gfx942:sramecc+:xnack-")
    if __import__("platform").system().lower() == "linux":
        assert refused.notes == ["[hipdnn] disagreement: " + str(folder / "Small.support.json")
                                 + " claims MIOPEN_ENGINE on gfx942/linux; hipdnn here: unsupported (no engine)"]
    ran = _hipdnn_row("ok")
    check_support(ran, ref, "gfx90a")
    assert ran.notes and "claims no engine on gfx90a" in ran.notes[0]
    agreed = _hipdnn_row("unsupported", "no engine")
    check_support(agreed, ref, "gfx90a")
    assert agreed.notes == []
    unknown = _hipdnn_row("ok")
    check_support(unknown, ref, None)     # no AMD arch known: nothing to judge
    assert unknown.notes == []


def test_sweep_support_claims_are_per_case(tmp_path: Path) -> None:
    """A sweep's ``support.json`` as quick/Pointwise/Default/support.json (@ 3987abd) writes it."""
    folder = _sweep(tmp_path, [_case(c, d, t) for c, (d, t) in SHAPES.items()])
    ids = list(SHAPES)
    (folder / "support.json").write_text(json.dumps({"version": 1, "claims": {"MIOPEN_ENGINE": [
        {"cases": ids[:2], "support": {"gfx942": ["linux"]}}, {"cases": ids[2:], "support": {"gfx950": ["linux"]}}]}}))
    refs = [s.bundle for s in expand([str(tmp_path)])]
    assert [r.support for r in refs] == [(("MIOPEN_ENGINE", "gfx942", "linux"),)] * 2 + [
        (("MIOPEN_ENGINE", "gfx950", "linux"),)]


def test_bad_support_file_names_file_and_field(tmp_path: Path) -> None:
    folder = _sdpa_bundle(tmp_path)
    (folder / "Small.support.json").write_text(json.dumps({"claims": {"MIOPEN_ENGINE": {"gfx942": "linux"}}}))
    [source] = expand([str(tmp_path)])
    with pytest.raises(GraphError, match=r"Small.support.json: \$.claims.MIOPEN_ENGINE: must map gfx arch"):
        source.read()


@pytest.mark.parametrize(("path", "name"), [
    # file-formats.md @ 6ed0dc19 ("Discovery and test names"): its example full name
    ("rocm-libraries/dnn-providers/integration-tests/integration_test_bundles/quick/BatchnormFwdInference/nchw/"
     "fp32/Small/Small.json", "quick_BatchnormFwdInference_nchw_fp32_Small.Small"),
    # the older golden_reference_data tree has one more folder (the variant) above {Name}/: every segment counts
    ("golden_reference_data/quick/SdpaFwd/bhsd/fp16/hd64_causal/Small/Small.json",
     "quick_SdpaFwd_bhsd_fp16_hd64_causal_Small.Small"),
    ("bundles.tar.gz:full/ConvFwd/nhwc/fp16/resnet50-layer3/resnet50-layer3.json",
     "full_ConvFwd_nhwc_fp16_resnet50_layer3.resnet50_layer3"),
    ("graphs/conv/conv.json", "conv"),              # no tier folder: not a bundle, the stem
    ("quick/SdpaFwd/bhsd/fp16/Small/Other.json", "Other"),   # not {Name}/{Name}.json
])
def test_a_bundle_row_is_named_after_upstreams_test_not_its_stem(path: str, name: str) -> None:
    """Every dnn-providers bundle is ``Small/Small.json``: rows named by the stem cannot be told apart."""
    from hipdnn_trace.graph.model import source_stem

    assert source_stem(path) == name


def test_per_tensor_dvc_pointers_of_the_older_tree_count_as_the_pointer(tmp_path: Path) -> None:
    """golden_reference_data/quick/BatchnormFwdInference/.../Small/Small.tensor0.bin.dvc (@ 991f394)."""
    folder = _sdpa_bundle(tmp_path, bins="none")
    (folder / "Small.tensors.dvc").unlink()
    (folder / "Small.meta.json").unlink()
    (folder / "Small.tensor1.bin.dvc").write_text("outs:\n- path: Small.tensor1.bin\n")
    [source] = expand([str(tmp_path)])
    assert source.bundle is not None and source.bundle.dvc == folder / "Small.tensor1.bin.dvc"
    assert _run(source).golden == "dvc-only"


def test_run_over_a_tree_of_bundles_and_sweeps_records_the_golden_column(tmp_path: Path) -> None:
    """``hipdnn-trace run TREE`` (through the Python API): every graph and case is a row; the summary's
    ``golden`` column says which rows had golden data and which only a DVC pointer."""
    import hipdnn_trace

    _sdpa_bundle(tmp_path / "tree" / "with_bins")
    _sdpa_bundle(tmp_path / "tree" / "pointer_only", bins="none")
    _sweep(tmp_path / "tree", [_case(c, d, t) for c, (d, t) in SHAPES.items()])
    run = hipdnn_trace.run(tmp_path / "tree", out=tmp_path / "runs", iters=1, warmup=0)
    assert run.meta["exit_code"] == 0
    rows = {(r["graph"], r["source"].split("/tree/")[1].split("/")[0]): r["golden"]
            for r in run.summary.iter_rows(named=True)}
    name = "quick_SdpaFwd_bhsd_fp16_tiny_Small.Small"   # upstream's test name, not the stem
    assert rows == {(name, "with_bins"): "used", (name, "pointer_only"): "dvc-only",
                    **{(f"quick_Pointwise_Default.{c}", "quick"): None for c in SHAPES}}
    assert set(run.validation.filter(run.validation["against"] == "golden")["passed"]) == {True}
    [record] = (tmp_path / "runs").glob("*/run.json")
    bundles = json.loads(record.read_text())["bundles"]
    assert sorted(b["golden"] for b in bundles.values()) == ["dvc-only", "used"]
    used = next(b for b in bundles.values() if b["golden"] == "used")
    assert used["graph"] == name and any(n.startswith("golden: expected outputs from") for n in used["notes"])


@pytest.mark.parametrize("bins", ["all", "outputs"])
def test_the_generators_own_causal_graph_validates_against_its_golden_output(tmp_path: Path, bins: str) -> None:
    """The generator's JSON form (uids 0-3, causal like hd64_causal/Small): with every file, and with
    only O's file (Q, K, V remade from the meta's seed and range)."""
    _sdpa_bundle(tmp_path, bins=bins, causal=True)
    run = _run(expand([str(tmp_path)])[0])
    assert run.status != "error", run.error
    assert _verdicts(run) == {"golden": True, "reference": True}, (run.validation, run.notes)


def test_upstream_bundles_and_sweeps_expand_load_and_small_ones_run(shared_fixtures: Path) -> None:
    """Real upstream trees, when the lead has placed them under ``../shared/fixtures/integration-bundles/``
    (byte copies of ROCm/rocm-libraries ``dnn-providers/integration-tests/{integration-test-bundles,
    golden_reference_data}/...`` folders, their SOURCES.md naming each commit): every sweep expands to one
    graph per case, every bundle graph loads with its bundle, and the small ones validate."""
    from hipdnn_trace.graph.load import load_bytes

    root = shared_fixtures / "integration-bundles"
    if not root.is_dir():
        pytest.skip("no upstream integration-test bundles under ../shared/fixtures/integration-bundles")
    sources = expand([str(root)])
    for sweep in root.rglob("sweep.json"):
        cases = json.loads(sweep.read_text())["cases"]
        assert [s.name for s in sources if s.name.startswith(f"{sweep}#")] == [f"{sweep}#{c['id']}" for c in cases]
    for source in sources:
        graph = load_bytes(source.read(), source.name)
        if source.path is not None and source.path.with_name(f"{source.path.stem}.meta.json").is_file():
            assert source.bundle is not None, source.name
        if sum(t.numel for t in graph.tensors) <= 1 << 20:
            run = _run(source)
            assert run.status != "error", (source.name, run.error)
            assert all(_verdicts(run).values()), (source.name, run.validation, run.notes)


def test_hipdnns_plain_layout_without_meta_is_a_bundle_too(tmp_path: Path) -> None:
    """``{Name}.json`` + ``{Name}.tensor{uid}.bin`` only (hipDNN's LoadGraphAndTensors layout, no meta, no
    pointer): the files are the inputs and the expected outputs."""
    folder = _sdpa_bundle(tmp_path)
    for name in ("Small.meta.json", "Small.tensors.dvc"):
        (folder / name).unlink()
    run = _run(expand([str(tmp_path)])[0])
    assert run.golden == "used" and _verdicts(run) == {"golden": True, "reference": True}


def test_runtime_scale_bundle_remakes_its_scale_tensor_from_the_meta(tmp_path: Path) -> None:
    """generate_sdpa_runtime_scale_test_bundle.py: Q, K, V as the forward generator, the scale a runtime
    tensor holding meta ``config.scale_value`` (here 1.0, far from 1/sqrt(d)); only O's file is kept."""
    meta = {**META, "generator": "generate_sdpa_runtime_scale_golden.py", "config": {"scale_value": 1.0}}
    _sdpa_bundle(tmp_path / "a", bins="outputs", meta=meta, causal=False, runtime_scale=1.0)
    run = _run(expand([str(tmp_path / "a")])[0])
    assert _verdicts(run) == {"golden": True, "reference": True}, (run.validation, run.notes)
    del meta["config"]
    _sdpa_bundle(tmp_path / "b", bins="outputs", meta=meta, causal=False, runtime_scale=1.0)
    assert _run(expand([str(tmp_path / "b")])[0]).golden == "unusable"

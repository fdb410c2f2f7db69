"""Speed of light: the peak table, picking its row, the per-graph bound, and where it shows up
(inspect, run's summary and run.json, calibrate). docs/speed-of-light.md."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.device import peaks as P
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph import ops
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.results.speed_of_light import node_class, peak_for, speed_of_light

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "graphs" / "perf" / "matmul" / "gemm_4096x4096x4096_fp16.json"
TABLE_GPUS = ("h100-sxm", "h100-pcie", "h200", "b200", "mi300x", "mi325x", "mi355x")


def _graph(path: Path):
    return load_bytes(path.read_bytes(), path.name)


def test_the_table_has_every_gpu_with_a_cited_source_and_dense_figures() -> None:
    rows = P.load()
    assert set(TABLE_GPUS) <= set(rows)
    for row in rows.values():
        assert row.source and row.url.startswith("https://") and row.printed
        assert {"fp64", "fp32", "bf16", "fp16", "fp8", "int8"} <= set(row.tflops)
        # dense: a 16-bit tensor peak is below 2x the fp8 one (a sparse figure would double it)
        assert row.tflops["fp8"] == pytest.approx(2 * row.tflops["fp16"], rel=0.01)
    assert rows["h100-sxm"].tflops["fp16"] == 989.4 and rows["h100-sxm"].hbm_tbs == 3.35
    assert {"fp4", "fp6"} <= set(rows["b200"].tflops) and {"fp4", "fp6"} <= set(rows["mi355x"].tflops)


@pytest.mark.parametrize("name,row", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H200", "h200"),
    ("NVIDIA B200", "b200"), ("AMD Instinct MI300X", "mi300x"), ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI355X", "mi355x")])
def test_the_gpu_name_picks_its_row(name: str, row: str) -> None:
    found, note = P.resolve(None, name)
    assert found is not None and found.name == row, note


@pytest.mark.parametrize("name", ["NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GB200", "NVIDIA A10G", None])
def test_an_unknown_gpu_gets_no_peaks_and_a_note_never_a_guess(name: str | None) -> None:
    found, note = P.resolve(None, name)
    assert found is None and "no speed of light" in note


def test_an_unknown_peaks_name_is_a_user_error_naming_the_known_ones() -> None:
    with pytest.raises(UserError, match="--peaks nope: .*h100-sxm"):
        P.resolve("nope", None)


def test_the_gemm_proof_0_139_ms_compute_bound_on_h100_sxm(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--json", "--peaks", "h100-sxm", str(GEMM)]) == 0
    sol = json.loads(capsys.readouterr().out)[0]["speed_of_light"]
    assert round(sol["ms"], 3) == 0.139
    assert sol["ms"] == pytest.approx(2 * 4096**3 / 989.4e12 * 1e3)
    assert sol["bound"] == "compute" and sol["peaks"] == "h100-sxm"
    assert sol["memory_ms"] == pytest.approx(3 * 4096 * 4096 * 2 / 3.35e12 * 1e3)


def test_inspect_without_peaks_on_a_machine_without_a_gpu_has_none(capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import hipdnn_trace.device.nvml as nvml

    monkeypatch.setattr(nvml, "gpu_info", lambda device=0: None)   # mocked: this box has no NVML GPU
    assert main(["inspect", "--json", str(GEMM)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["speed_of_light"] is None


def test_a_half_matmul_accumulating_in_float_counts_at_the_fp16_peak() -> None:
    g = _graph(GEMM)
    assert g.compute_data_type == "float" and node_class(g.nodes[0], g) == "fp16"


def test_float_side_inputs_do_not_set_the_rate_the_operands_do() -> None:
    """An attention backward reads float softmax statistics beside bf16 Q, K, V, O and dO: it runs at the
    bf16 rate. Counted at fp32 (the widest input) its bound was 6.6x what an H200 measured."""
    g = _graph(ROOT / "graphs" / "perf" / "attention" / "llama3_8b_prefill_s4096_backward_bf16.json")
    node = next(n for n in g.nodes if ops.node_flops(n, g))
    kinds = {g.by_uid[u].data_type for u in node.input_uids() if u in g.by_uid and not g.by_uid[u].virtual}
    assert "float" in kinds and "bfloat16" in kinds   # the case this rule is about
    assert node_class(node, g) == "bf16"
    sol = speed_of_light(g, P.load()["h200"])
    assert sol is not None and sol.classes == {"bf16": "bf16"}


def test_a_memory_bound_graph_is_bounded_by_bytes_over_bandwidth() -> None:
    g = _graph(ROOT / "graphs" / "matmul" / "matmul_2d_fp16.json")
    peaks = P.load()["h100-sxm"]
    sol = speed_of_light(g, peaks)
    assert sol is not None and sol.bound == "memory" and sol.ms == sol.memory_ms > sol.compute_ms


def test_a_type_without_a_peak_falls_back_to_the_next_wider_one() -> None:
    h100 = P.load()["h100-sxm"]
    assert peak_for(h100, "fp4") == ("fp8", 1978.9)   # Hopper has no fp4 / fp6 units
    assert peak_for(P.load()["b200"], "fp4") == ("fp4", 9000.0)


def test_a_peaks_file_round_trips_and_replaces_the_table(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    mine = P.Peaks(name="my-gpu", tflops={"fp16": 100.0, "fp32": 10.0}, hbm_tbs=1.0, source="measured by hand",
                   match=("My GPU",), origin="calibrated")
    path = tmp_path / "mine.toml"
    path.write_text(P.to_toml([mine]))
    back = P.load(path)["my-gpu"]
    assert back.tflops == mine.tflops and back.hbm_tbs == 1.0 and back.source == "measured by hand"
    assert main(["inspect", "--json", "--peaks", str(path), str(GEMM)]) == 0
    sol = json.loads(capsys.readouterr().out)[0]["speed_of_light"]
    assert sol["ms"] == pytest.approx(2 * 4096**3 / 100e12 * 1e3) and sol["peaks"] == "my-gpu"


@pytest.mark.parametrize("text,problem", [
    ("schema = 2", "schema must be 1"),
    ("schema = 1\n[gpus.x]\nhbm_tbs = 1\nsource = 's'\n[gpus.x.tflops]\nfp5 = 1", "unknown data type 'fp5'"),
    ("schema = 1\n[gpus.x]\nhbm_tbs = -1\nsource = 's'\n[gpus.x.tflops]\nfp16 = 1", "hbm_tbs must be a positive"),
    ("schema = 1\n[gpus.x]\nhbm_tbs = 1\n[gpus.x.tflops]\nfp16 = 1", "source must name"),
    ("schema = [", "not a TOML peaks file")])
def test_a_bad_peaks_file_is_one_line_naming_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            text: str, problem: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["inspect", "--peaks", str(path), str(GEMM)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and problem in err


def test_run_records_the_peaks_and_the_summary_gets_speed_of_light(tmp_path: Path) -> None:
    graph = ROOT / "graphs" / "matmul" / "matmul_2d_fp16.json"
    assert main(["run", str(graph), "-w", "0", "-i", "2", "-q", "--peaks", "h100-sxm", "--no-trace",
                 "--out", str(tmp_path), "--run-id", "r"]) == 0
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    block = meta["speed_of_light"]
    assert block["asked"] == "h100-sxm" and block["peaks"]["tflops"]["fp16"] == 989.4
    assert "datasheet" in block["peaks"]["source"]
    row = pl.read_csv(tmp_path / "r" / "summary.csv").row(0, named=True)
    sol = speed_of_light(_graph(graph), P.load()["h100-sxm"])
    assert row["sol_ms"] == pytest.approx(sol.ms) and row["sol_bound"] == "memory"
    assert row["sol_share"] == pytest.approx(sol.ms / row["median"])


def test_a_run_without_peaks_on_a_cpu_has_no_speed_of_light_and_says_why(tmp_path: Path) -> None:
    graph = ROOT / "graphs" / "matmul" / "matmul_2d_fp16.json"
    assert main(["run", str(graph), "-w", "0", "-i", "2", "-q", "--no-trace",
                 "--out", str(tmp_path), "--run-id", "r"]) == 0
    block = json.loads((tmp_path / "r" / "run.json").read_text())["speed_of_light"]
    assert block["peaks"] is None and "no GPU recorded" in block["note"]
    assert pl.read_csv(tmp_path / "r" / "summary.csv")["sol_ms"].null_count() == 1


def test_calibrate_without_a_gpu_says_so_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu:
        pytest.skip("this machine has a GPU: the no-GPU path does not run here")
    assert main(["calibrate", "--out", str(tmp_path / "p.toml")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no GPU" in err and not (tmp_path / "p.toml").exists()


@pytest.mark.cuda
def test_calibrate_measures_this_gpu_into_a_peaks_file_the_loader_reads(tmp_path: Path) -> None:
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--out", str(out), "--size", "2048", "--copy-gib", "0.5"]) == 0
    row = next(iter(P.load(out).values()))
    assert row.hbm_tbs > 0 and row.tflops["fp16"] > row.tflops["fp64"] > 0
    found, _ = P.resolve(str(out), None)
    assert found is not None and found.origin.startswith("calibrated")


def test_report_shows_speed_of_light_columns_and_roofs_per_data_type(tmp_path: Path) -> None:
    from hipdnn_trace.compare import plots

    graph = ROOT / "graphs" / "matmul" / "matmul_2d_fp16.json"
    assert main(["run", str(graph), "-w", "0", "-i", "2", "-q", "--peaks", "h100-sxm", "--no-trace",
                 "--out", str(tmp_path), "--run-id", "r"]) == 0
    assert main(["report", str(tmp_path / "r"), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep.md").read_text()
    assert "| light ms | bound | of light |" in md and "| memory |" in md
    assert "Roofs: NVIDIA H100 SXM5 80GB" in (tmp_path / "rep.html").read_text()
    points = [("", "ref", 10.0, 1.0, "g")]
    assert plots.roofline(points, None, 3350.0, {"fp16": 989.4, "bf16": 989.4, "fp32": 67.0})

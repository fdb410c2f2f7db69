"""One verdict (issue 33): ``run`` refuses every graph ``inspect`` refuses, before it makes an input,
with inspect's line, and runs every graph inspect says it can run, under the same flags.

Over the bombs (a conv of hours, a graph whose host tensors cannot fit, one whose float64 evaluation
cannot fit, one whose validating reference run drops for its memory, a rule every backend refuses)
and over the bundled suite (``graphs/``, perf included, and the upstream graphs beside the checkout
when present), at run's default limit and at one tight enough that many graphs straddle it, with and
without validation, ``--reference-device`` auto and cpu: each graph's row from ``run`` (in process,
``--no-isolate``, its ``_inputs`` replaced by a marker that says run went on to make inputs) is
compared with ``inspect --json`` on the reference and torch backends (torch's CPU build where it is
installed; "not available" from both where it is not). Nothing is computed: a refusal comes first
or the marker stops the graph.

The float64 rate both commands judge at is the machine's kept one (``backends/reference/rate.py``),
in a cache folder of the test's own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from graph_dicts import write_built
from repo_paths import GRAPHS, SHARED_FIXTURES

from hipdnn_trace.backends.reference import available_memory_bytes, rate
from hipdnn_trace.bench import graph_run
from hipdnn_trace.cli import main
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.results.rundir import load_run

#: what run says when it got past every refusal (its inputs step raises it, the row records it)
REACHED = "reached inputs: run did not refuse"
#: free memory moves between two commands; a memory line's "N GiB available" is compared without it
LIVE = re.compile(r"[0-9.]+ GiB available")
BACKENDS = ("reference", "torch")


@pytest.fixture(autouse=True)
def own_rate_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept rates in a folder of this module's own; each command starts as a new process would."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "one-verdict-cache"))
    monkeypatch.delenv(rate.RATE_ENV, raising=False)
    rate.float64_rate.cache_clear()
    yield
    rate.float64_rate.cache_clear()


@pytest.fixture
def no_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    def reached(*args, **kwargs):
        raise RuntimeError(REACHED)
    monkeypatch.setattr(graph_run, "_inputs", reached)


_write = write_built


def bombs(folder: Path) -> Path:
    """Graphs made to be refused (or, the memory-dropped oracle, to be run unvalidated)."""
    b = GraphBuilder("conv_issue33_hours", io="float")   # the graph: 66 TFLOP, hours on a CPU
    b.conv_fwd(b.tensor("x", [512, 256, 32, 32]), b.tensor("w", [256, 256, 31, 31]), pad=15, out="y")
    _write(folder, b)
    b = GraphBuilder("conv_issue15_66tflop", io="half")   # issue 15's: ~130 GiB for one float64 evaluation
    b.conv_fwd(b.tensor("x", [1, 2048, 256, 256]), b.tensor("w", [2048, 2048, 11, 11]), pad=5, out="y")
    _write(folder, b)
    b = GraphBuilder("relu_host_bomb")                     # 2 x 128 GiB of fp32 host tensors
    b.pointwise("relu_fwd", b.tensor("x", [2**35]), out="y")
    _write(folder, b)
    have = available_memory_bytes()
    if have is not None:
        # host tensors (16 B/element) fit in half of what is free, float64 copies (48 B) do not:
        # the reference backend cannot run it, a validating run drops its reference with a note
        b = GraphBuilder("relu_float64_bomb")
        b.pointwise("relu_fwd", b.tensor("x", [have // 32]), out="y")
        _write(folder, b)
    b = GraphBuilder("ln_inference_mean")                   # a rule of the graph: every backend refuses
    b.layernorm(b.tensor("x", [4, 8, 16]), b.tensor("scale", [1, 1, 16]), b.tensor("bias", [1, 1, 16]))
    doc = b.to_json()
    doc["nodes"][0]["attributes"]["forward_phase"] = "INFERENCE"
    (folder / "ln_inference_mean.json").write_text(json.dumps(doc))
    return folder


def inspect_verdicts(paths: list[str], flags: list[str], capsys) -> dict[tuple[str, str], str | None]:
    """(source, backend) -> inspect's refusal line (None: can run); unavailable backends left out."""
    capsys.readouterr()
    assert main(["inspect", "--json", *flags, *paths]) == 0
    out: dict[tuple[str, str], str | None] = {}
    for info in json.loads(capsys.readouterr().out):
        for b in info["backends"]:
            if b["name"] in BACKENDS and b["available"]:
                out[(info["source"], b["name"])] = None if b["supported"] else b["supported_reason"]
    return out


def run_verdicts(paths: list[str], backend: str, flags: list[str], out: Path,
                 capsys) -> dict[str, tuple[str, str]] | None:
    """source -> (status, error) of run's one row per graph; None when the backend is not available."""
    capsys.readouterr()
    run_id = f"{backend}-{len(list(out.glob('*')))}"
    code = main(["run", *paths, "--backend", backend, "--include-perf", "--no-isolate", "-w", "0", "-i", "1",
                 "-q", "--no-trace", "--out", str(out), "--run-id", run_id, *flags])
    capsys.readouterr()
    if code == 1 and not (out / run_id).exists():   # the backend is not installed: one line, no run
        return None
    rows = load_run(out / run_id).summary.to_dicts()
    assert len({r["source"] for r in rows}) == len(rows), "one row per graph"
    return {r["source"]: (r["status"], r["error"] or "") for r in rows}


def assert_agree(inspected: dict[tuple[str, str], str | None], ran: dict[str, tuple[str, str]],
                 backend: str) -> int:
    """Every graph: refused by both with the same line, or refused by neither; the count refused."""
    refused = 0
    sources = {s for s, b in inspected if b == backend}
    assert sources == set(ran), "run and inspect read the same graphs"
    for source in sorted(sources):
        line, (status, error) = inspected[(source, backend)], ran[source]
        if line is None:
            assert REACHED in error, f"{source} on {backend}: inspect says it can run, run refused: {error}"
            continue
        refused += 1
        assert REACHED not in error, f"{source} on {backend}: inspect refuses ({line}), run went on"
        expected = line if status == "unsupported" else f"{source}: {line}"
        assert LIVE.sub("", error) == LIVE.sub("", expected), (source, backend, status)
    return refused


FLAG_SETS = [
    [],                                                               # run's defaults: 600 s, validate, auto
    ["--max-reference-seconds", "0.02"],                              # many graphs straddle it
    ["--max-reference-seconds", "0.02", "--validate", "none"],       # only the reference backend is timed
    ["--max-reference-seconds", "0.02", "--reference-device", "cpu"],
]


@pytest.mark.parametrize("flags", FLAG_SETS, ids=["defaults", "tight", "tight-no-validation", "tight-cpu"])
def test_run_and_inspect_agree_on_the_bombs(flags, tmp_path, capsys, no_inputs, monkeypatch) -> None:
    # the 2-core box's float64 rate, so "hours" is hours on any machine (a 16-core GPU host runs the conv
    # in 4 min: seen on the H200 machine); the agreement itself holds at any rate
    monkeypatch.setenv(rate.RATE_ENV, "30")
    folder = bombs(tmp_path / "bombs")
    paths = [str(p) for p in sorted(folder.glob("*.json"))]
    inspected = inspect_verdicts(paths, flags, capsys)
    for backend in BACKENDS:
        ran = run_verdicts(paths, backend, flags, tmp_path / "runs", capsys)
        if ran is None:
            assert not any(b == backend for _, b in inspected)
            continue
        refused = assert_agree(inspected, ran, backend)
        if backend == "reference":
            assert refused >= 4   # hours, two memory bombs at least, the graph's rule
    reference = {s: line for (s, b), line in inspected.items() if b == "reference"}
    hours = reference[str(folder / "conv_issue33_hours.json")]
    assert hours is not None and ("over the --max-reference-seconds limit" in hours or "host memory" in hours)


@pytest.mark.slow
@pytest.mark.parametrize("flags", FLAG_SETS[:2], ids=["defaults", "tight"])
def test_run_and_inspect_agree_on_the_bundled_suite(flags, tmp_path, capsys, no_inputs, steady_memory) -> None:
    paths = [str(GRAPHS)]
    upstream = SHARED_FIXTURES / "upstream-graphs"
    if upstream.is_dir():
        paths.append(str(upstream))
    inspected = inspect_verdicts(paths, flags, capsys)
    refused = {}
    for backend in BACKENDS:
        ran = run_verdicts(paths, backend, flags, tmp_path / "runs", capsys)
        if ran is not None:
            refused[backend] = assert_agree(inspected, ran, backend)
    assert len({s for s, _ in inspected}) >= 300
    if flags:   # at 20 ms the perf graphs' float64 references are refused on any CPU, the small ones are not
        assert 0 < refused["reference"] < len({s for s, _ in inspected})


def test_reference_device_cuda_without_a_gpu_is_one_line_from_both_gpu_mocked(tmp_path, capsys, monkeypatch):
    """--reference-device cuda where torch sees no GPU (forced here, the same on a GPU machine): inspect
    refuses the flag with run's line, before any graph is judged."""
    from hipdnn_trace.backends import installed

    monkeypatch.setattr(installed, "torch_gpu_missing", lambda vendor=None: "torch sees no GPU")
    path = bombs(tmp_path / "bombs") / "ln_inference_mean.json"
    flags = ["--reference-device", "cuda"]
    capsys.readouterr()
    assert main(["inspect", *flags, str(path)]) == 1
    inspected = capsys.readouterr().err.strip()
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), *flags]) == 1   # torch or not
    ran = capsys.readouterr().err.strip()
    line = "--reference-device cuda: torch sees no GPU; use --reference-device cpu"
    assert inspected.endswith(line) and ran.endswith(line)
    assert not (tmp_path / "runs").exists()


def test_the_reference_device_is_decided_without_importing_torch() -> None:
    """auto (cuda when torch sees a GPU) and cuda are judged from torch's build file and the driver's GPU
    count: neither inspect's nor run's decision starts torch (the children, which compute, import it)."""
    import subprocess
    import sys

    from reliability_helpers import REPO, cli_env

    code = ("import sys\nfrom hipdnn_trace.bench.verdict import reference_device\n"
            "for asked in ('auto', 'cpu'):\n    reference_device(True, asked)\n"
            "try:\n    reference_device(True, 'cuda')\nexcept Exception:\n    pass\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"

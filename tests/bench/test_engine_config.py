"""``run --test-config``: a dnn-providers engine TOML judges hipDNN rows (bench/engine_config.py, output_check.py).

The format is dnn-providers' ``integration-tests/docs/file-formats.md`` @ 6ed0dc19 ("Per-engine test config");
the rms rule is hipDNN's ``CpuFpReferenceMiopenRmsValidation.hpp``, recomputed here from its definition.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hipdnn_trace.bench import graph_run
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.engine_config import EngineConfigError, load_engine_config
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.output_check import judge_output
from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

#: file-formats.md's example, with a second tolerance entry to show that the later one wins
EXAMPLE = """
[meta]
version = 1

[[tolerance_overrides]]
filters = ["Smoke/IntegrationGpuConvWrw3dBfp16.Correctness/14", "quick_Relu_*"]
atol = 1.19
rtol = 0.2

[[tolerance_overrides]]
filters = ["quick_Relu_Default.*"]
atol = 0.5
rtol = 0.25

[[validator_overrides]]
filters       = ["*LayernormBackward*", "quick_Relu_*"]
tensors       = ["*::DSCALE", "*::DBIAS", "y"]
validator     = "rms"
rms_threshold = 1e-4

[[test_skips]]
archs     = ["gfx90a", "gfx10", "gfx11", "gfx12"]
platforms = ["windows"]
filters   = ["*ConvFwdBiasActiv*"]
reason    = "ROCm/rocm-libraries#6979 - no engine has an applicable solution"

[[test_skips]]
filters   = ["*ConvFwdBiasActiv*"]
reason    = "second entry: never reached when the first matches"
"""


def _config(tmp_path: Path, text: str = EXAMPLE):
    path = tmp_path / "MIOPEN_ENGINE.toml"
    path.write_text(text)
    return load_engine_config(path)


def test_the_documented_example_reads_and_matches_as_upstream_says(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert config.tolerance("quick_Relu_Default.case_1").atol == 0.5            # later entries win
    assert config.tolerance("quick_Relu_Other.case_1").atol == 1.19
    assert config.tolerance("Smoke/IntegrationGpuConvWrw3dBfp16.Correctness/140") is None   # globs are whole
    assert config.validator("quick_Relu_Default.a", "y").rms_threshold == 1e-4
    assert config.validator("quick_Relu_Default.a", "x") is None
    assert config.validator("Full/LayernormBackwardFp32.C/3", "LayernormBackward_0::DSCALE").validator == "rms"
    # the first matching skip wins; archs are substrings of the raw gcnArchName; platforms filter
    assert config.skip("quick_ConvFwdBiasActiv.a", "gfx1100", "windows").startswith("[arch gfx1100] ROCm/")
    assert config.skip("quick_ConvFwdBiasActiv.a", "gfx942:sramecc+:xnack-", "linux").endswith(
        "reached when the first matches (MIOPEN_ENGINE.toml test_skips[1])")
    assert config.skip("quick_Relu_Default.a", "gfx90a", "windows") is None


@pytest.mark.parametrize("text,field", [
    ("[[test_skips]]\nfilters = ['*']\nreason = 'x'\n", "[meta].version"),
    ("[meta]\nversion = 2\n", "[meta].version"),
    ("[meta]\nversion = 1\n[[tolerance_overrides]]\nfilters = ['*']\natol = 0.1\n", "tolerance_overrides[0].rtol"),
    ("[meta]\nversion = 1\n[[validator_overrides]]\nfilters = ['*']\ntensors = ['*']\nvalidator = 'rms'\n",
     "validator_overrides[0].rms_threshold"),
    ("[meta]\nversion = 1\n[[validator_overrides]]\nfilters = ['*']\ntensors = ['*']\nvalidator = 'allclose'\n"
     "rms_threshold = 1e-3\n", "validator_overrides[0].rms_threshold"),
    ("[meta]\nversion = 1\n[[validator_overrides]]\nfilters = ['*']\ntensors = ['*']\nvalidator = 'ulp'\n",
     "validator_overrides[0].validator"),
    ("[meta]\nversion = 1\n[[test_skips]]\nfilters = ['*']\n", "test_skips[0].reason"),
    ("[meta]\nversion = 1\n[[test_skips]]\nfilters = ['*']\nreason = 'r'\nplatforms = ['macos']\n",
     "test_skips[0].platforms"),
    ("[meta\nversion = 1\n", ""),
])
def test_a_bad_config_is_one_line_naming_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(EngineConfigError) as err:
        _config(tmp_path, text)
    assert str(err.value).startswith(f"{tmp_path / 'MIOPEN_ENGINE.toml'}: {field}") and "\n" not in str(err.value)
    assert ": :" not in str(err.value)


def _relu():
    b = GraphBuilder("relu")
    x = b.tensor("x", [2, 4])
    b.pointwise("relu_fwd", x, out="y")
    graph = b.build()
    return graph, graph.output_tensors[0].uid


def _judge(config, backend: str, actual, expected, test: str = "quick_Relu_Default.a", engine: str = ""):
    graph, uid = _relu()
    row = ConfigRun(config=Config(backend, backend, engine=engine or None))
    result, _, _ = judge_output(graph, GraphRun(source="s", name=test), uid, np.asarray(actual, np.float32),
                                np.asarray(expected, np.float64), atol=None, rtol=None, engine_config=config, row=row)
    return result


def test_the_rms_validator_is_hipdnns_definition(tmp_path: Path) -> None:
    """sqrt(sum((ref - out)^2)) / (sqrt(n) * max(max|ref|, max|out|)) against the threshold."""
    expected = [[1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 0.5]]
    actual = [[1.0, 2.0, 3.0, 4.0004], [0.5, 0.5, 0.5, 0.5]]
    error = 0.0004 / (math.sqrt(8) * 4.0004)                     # 3.5e-5: within 1e-4
    result = _judge(_config(tmp_path), "hipdnn", actual, expected)
    assert result.passed and f"{error:.3g}" in result.message(), result.message()
    worse = _judge(_config(tmp_path), "hipdnn", [[1.0, 2.0, 3.0, 4.004], [0.5] * 4], expected)
    assert not worse.passed and "over 0.0001" in worse.message()
    assert not _judge(_config(tmp_path), "hipdnn", [[np.nan, 2, 3, 4], [0.5] * 4], expected).passed


def test_an_engine_config_judges_only_hipdnn_rows_of_its_engine(tmp_path: Path) -> None:
    """cuDNN's and torch's rows keep hipDNN's default tolerances: the TOML is one engine's drift."""
    expected, actual = [[1.0, 2.0, 3.0, 4.0], [0.5] * 4], [[1.0, 2.0, 3.0, 4.3], [0.5] * 4]
    assert not _judge(_config(tmp_path), "torch", actual, expected).passed
    named = _config(tmp_path, EXAMPLE.replace("version = 1", "version = 1\nengine = \"MIOPEN_ENGINE\""))
    other = _judge(named, "hipdnn", actual, expected, engine="HIPBLASLT_ENGINE")
    assert other.rule is None and not other.passed
    mine = _judge(named, "hipdnn", actual, expected, engine="prefer:MIOPEN_ENGINE")
    assert mine.rule is not None   # its rms validator judged it


def test_matching_infinities_are_equal_only_under_that_validator(tmp_path: Path) -> None:
    text = EXAMPLE.replace('validator     = "rms"\nrms_threshold = 1e-4',
                           'validator     = "allclose_matching_infinities"')
    config = _config(tmp_path, text)
    expected = [[-np.inf, 2.0, 3.0, 4.0], [0.5] * 4]
    assert _judge(config, "hipdnn", [[-np.inf, 2, 3, 4], [0.5] * 4], expected).passed
    assert not _judge(config, "hipdnn", [[np.inf, 2, 3, 4], [0.5] * 4], expected).passed    # opposite signs
    assert not _judge(config, "hipdnn", [[-np.inf, 2, 3, 4], [0.5] * 4], expected, test="quick_Other.a").passed


def test_a_skip_is_the_rows_reason_before_anything_runs(tmp_path: Path) -> None:
    config = _config(tmp_path, EXAMPLE.replace('"*ConvFwdBiasActiv*"]\nreason    = "second',
                                               '"*ConvFwdBiasActiv*", "relu"]\nreason    = "second'))
    b = GraphBuilder("relu")
    b.pointwise("relu_fwd", b.tensor("x", [2, 4]))
    source = GraphSource("relu.json", lambda: json.dumps(b.to_json()).encode())
    run = graph_run.run_graph(source, [Config("hipdnn", "hipdnn"), Config("reference", "reference")],
                              graph_run.RunSettings(loop=LoopSettings(warmup=0, iters=1), engine_config=config),
                              Markers())
    hip, ref = run.configs
    assert hip.status == "unsupported" and hip.error.startswith("skipped by --test-config: [arch none] second"), \
        hip.error
    assert ref.status == "ok"


def test_the_cli_refuses_a_bad_config_in_one_line_and_records_a_good_one(tmp_path: Path) -> None:
    b = GraphBuilder("relu")
    b.pointwise("relu_fwd", b.tensor("x", [2, 4]))
    (tmp_path / "relu.json").write_text(json.dumps(b.to_json()))
    (tmp_path / "bad.toml").write_text("[meta]\nversion = 3\n")
    cmd = [sys.executable, "-m", "hipdnn_trace", "run", str(tmp_path / "relu.json"), "-w", "0", "-i", "1",
           "-o", str(tmp_path / "runs"), "--test-config"]
    bad = subprocess.run([*cmd, str(tmp_path / "bad.toml")], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "[meta].version" in bad.stderr
    assert not (tmp_path / "runs").exists()
    (tmp_path / "good.toml").write_text(EXAMPLE)
    good = subprocess.run([*cmd, str(tmp_path / "good.toml")], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    [record] = (tmp_path / "runs").glob("*/run.json")
    assert json.loads(record.read_text())["validation"]["test_config"] == str(tmp_path / "good.toml")

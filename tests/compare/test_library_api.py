"""The library entry points: ``hipdnn_trace.compare`` and ``hipdnn_trace.load_run``."""

from __future__ import annotations

import importlib

import hipdnn_trace
from hipdnn_trace.compare import Comparison, compare_runs


def test_compare_is_callable_even_after_the_subpackage_is_imported(make_run, timings) -> None:
    importlib.import_module("hipdnn_trace.compare.stats")  # binds hipdnn_trace.compare
    a = make_run("A", {"g": timings(1.0, 0.02, 30)})
    b = make_run("B", {"g": timings(1.0, 0.02, 30)})
    result = hipdnn_trace.compare(a, b, threshold=0.1, seed=1)
    assert isinstance(result, Comparison)
    assert result.table.equals(compare_runs(a, b, threshold=0.1, seed=1).table)
    assert result.settings["threshold"] == 0.1


def test_load_run_frames_feed_compare(make_run, timings) -> None:
    a = hipdnn_trace.load_run(make_run("A", {"g": timings(1.0, 0.02, 30)}))
    b = hipdnn_trace.load_run(make_run("B", {"g": timings(1.5, 0.02, 30)}))
    assert a.iterations.filter(a.iterations["phase"] == "timed").height == 30
    assert compare_runs(a, b).exit_code == 3


def test_comparison_repr_is_one_line_and_names_the_frames(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1.0, 0.02, 30)})
    b = make_run("B", {"g": timings(1.5, 0.02, 30)})
    text = repr(hipdnn_trace.compare(a, b, seed=1))
    assert "\n" not in text and len(text) < 300
    assert "1 matched pair(s)" in text and "SLOWER" in text and ".table" in text


def test_run_rejects_a_misspelled_option_naming_the_flag(tmp_path) -> None:
    import pytest

    from hipdnn_trace.errors import UserError

    with pytest.raises(UserError, match=r"unknown option 'itres' \(did you mean 'iters'\?\)"):
        hipdnn_trace.run("graphs/pool", out=tmp_path, itres=50)
    assert not any(tmp_path.iterdir())


def test_run_that_cannot_start_raises_with_the_reason(tmp_path) -> None:
    import pytest

    from hipdnn_trace.errors import UserError

    with pytest.raises(UserError, match=r"exit code 1\): .*no-such-folder: no such file or folder"):
        hipdnn_trace.run(str(tmp_path / "no-such-folder"), out=tmp_path / "runs", iters=2)

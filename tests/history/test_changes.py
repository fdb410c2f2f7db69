"""Change points on the synthetic nightly history (tests/support/synthetic_history.py: 60 nights x 200
graphs with the noise this repository measured, three injected steps of 2%, 5% and 20%): each step is found
at the run where it was injected, with its size inside the reported interval, and at most one alarm falls
where nothing was injected. docs/history.md has the numbers."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic_history import DEFAULT_STEPS, graph_name, write_history

from hipdnn_trace.history.changes import find_steps
from hipdnn_trace.history.importer import import_runs
from hipdnn_trace.history.series import changes_in, load_series, version_changes
from hipdnn_trace.history.store import Store


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("history")
    store = Store(str(folder / "h.duckdb"))
    import_runs(store, write_history(folder / "runs"))
    return changes_in(load_series(store))


def test_every_injected_step_is_found_at_its_run(found) -> None:
    at = {(c.graph, c.run_id) for c in found}
    for night in sorted({s.night for s in DEFAULT_STEPS}):
        hits = [s for s in DEFAULT_STEPS if s.night == night and (graph_name(s.graph), f"nightly-{night:03d}") in at]
        assert hits, f"the step at night {night} was not found at its run"
    exact = [s for s in DEFAULT_STEPS if (graph_name(s.graph), f"nightly-{s.night:03d}") in at]
    assert len(exact) >= len(DEFAULT_STEPS) - 1   # one 2% step on a noisy graph may land a night or two off


def test_sizes_sit_in_their_intervals_and_the_versions_that_moved_are_named(found) -> None:
    injected = {graph_name(s.graph): s for s in DEFAULT_STEPS}
    for c in found:
        if c.graph in injected and c.run_id == f"nightly-{injected[c.graph].night:03d}":
            assert c.ratio_low <= injected[c.graph].ratio * 1.005 and injected[c.graph].ratio * 0.995 <= c.ratio_high
            assert c.versions_changed.startswith("cudnn 9.")
            assert c.kind == ("regression" if injected[c.graph].ratio > 1 else "improvement")


def test_at_most_one_false_alarm(found) -> None:
    injected = {graph_name(s.graph) for s in DEFAULT_STEPS}
    false = [c for c in found if c.graph not in injected]
    assert len(false) <= 1, [(c.graph, c.run_id, c.ratio) for c in false]


def test_a_flat_noisy_series_has_no_step_and_a_clear_one_has_exactly_one() -> None:
    rng = np.random.default_rng(7)
    flat = np.exp(rng.normal(0, 0.01, 60))
    assert find_steps(flat, flat * 0.99, flat * 1.01) == []
    stepped = flat.copy()
    stepped[30:] *= 1.10
    steps = find_steps(stepped, stepped * 0.99, stepped * 1.01)
    assert [s.index for s in steps] == [30] and 1.07 < steps[0].ratio < 1.13


def test_too_short_a_series_has_no_step() -> None:
    x = np.array([1.0, 1.0, 2.0, 2.0])
    assert find_steps(x, x, x) == []


def test_version_changes_names_only_what_moved() -> None:
    assert version_changes({"cudnn": "9.18", "torch": "2.11"}, {"cudnn": "9.19", "torch": "2.11"}) == \
        "cudnn 9.18 -> 9.19"
    assert version_changes({"a": 1}, {"a": 1}) == ""

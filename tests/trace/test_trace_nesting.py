"""Slices nest by time on a track whatever order they are written in.

Perfetto pairs BEGIN/END events after a stable sort by timestamp; slices that
touch (an iteration ending exactly when execute ends) only nest right if the
writer orders ties. Property: for any nested forest written in any order, the
depth read back is the depth in the forest.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings, strategies as st

from hipdnn_trace.trace import TraceWriter, read_trace


def _forest(rng: random.Random, lo: int, hi: int, depth: int, out: list[tuple[int, int, int]]) -> None:
    """Children of [lo, hi]: disjoint, non-empty, may touch each other and the parent's ends."""
    if depth > 4 or hi - lo < 1:
        return
    k = rng.randint(0, 3)
    cuts = sorted(rng.randint(lo, hi) for _ in range(2 * k))
    for a, b in zip(cuts[::2], cuts[1::2]):
        if a < b:
            out.append((a, b, depth))
            _forest(rng, a, b, depth + 1, out)


@settings(max_examples=60, deadline=None)
@given(rng=st.randoms(use_true_random=False), bulk=st.booleans())
def test_depth_matches_the_forest_for_any_write_order(
    check_trace, tmp_path_factory, rng: random.Random, bulk: bool
) -> None:
    expected: list[tuple[int, int, int]] = []
    _forest(rng, 0, 60, 0, expected)
    written = expected[:]
    rng.shuffle(written)
    path = tmp_path_factory.mktemp("nest") / "t.pftrace"
    with TraceWriter(path) as w:
        track = w.thread_track("t", w.process_track("p", pid=1), tid=1)
        if bulk and written:
            w.slices(track, "s", [a for a, _, _ in written], [b for _, b, _ in written])
        else:
            for a, b, _ in written:
                w.slice(track, "s", a, b)
    check_trace(path)
    got = read_trace(path).slices
    assert sorted(zip(got["ts_ns"], got["ts_ns"] + got["dur_ns"], got["depth"])) == sorted(expected)


def test_zero_length_slices_and_instants_sit_inside_what_starts_with_them(tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    with TraceWriter(path) as w:
        track = w.thread_track("t", w.process_track("p", pid=1), tid=1)
        w.slice(track, "marker", 10, 10)  # written before its parent
        w.slice(track, "before", 0, 10)
        w.slice(track, "parent", 10, 20)
        w.instant(track, "mid", 15)
    rows = read_trace(path).slices.select("name", "depth", "dur_ns").rows()
    assert rows == [("before", 0, 10), ("parent", 0, 10), ("marker", 1, 0), ("mid", 1, 0)]

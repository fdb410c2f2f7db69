"""The history's proof on the synthetic nightly history (issue 37): 60 runs of 200 graphs with this
repository's measured noise and three injected steps (tests/support/synthetic_history.py). Times the
import into DuckDB (and PostgreSQL, with --postgres URL) and the change-point pass, and prints what was
found against what was injected.

    python benchmarks/history_synthetic.py [--nights 60] [--graphs 200] [--postgres postgresql://...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from synthetic_history import DEFAULT_STEPS, graph_name, write_history  # noqa: E402

from hipdnn_trace.history.importer import import_runs  # noqa: E402
from hipdnn_trace.history.series import changes_in, load_series  # noqa: E402
from hipdnn_trace.history.store import Store  # noqa: E402


def measure(target: str, runs: list[Path]) -> None:
    t0 = time.perf_counter()
    store = Store(target)
    outcome = import_runs(store, runs)
    t1 = time.perf_counter()
    points = load_series(store)
    changes = changes_in(points)
    t2 = time.perf_counter()
    injected = {(graph_name(s.graph), f"nightly-{s.night:03d}"): s for s in DEFAULT_STEPS}
    print(f"{target.split('@')[-1]}: import {len(outcome.imported)} runs / {outcome.rows} rows in {t1 - t0:.2f} s; "
          f"series + change points in {t2 - t1:.2f} s; {len(changes)} steps")
    nights = {graph_name(s.graph): s.night for s in DEFAULT_STEPS}
    for c in changes:
        if (c.graph, c.run_id) in injected:
            mark = "injected here"
        elif c.graph in nights:
            mark = f"injected at nightly-{nights[c.graph]:03d}, found at another run"
        else:
            mark = "FALSE ALARM"
        print(f"  {c.graph} at {c.run_id}: x{c.ratio:.4f} [{c.ratio_low:.4f}, {c.ratio_high:.4f}] ({mark}; "
              f"{c.versions_changed})")
    missed = set(injected) - {(c.graph, c.run_id) for c in changes}
    print(f"  injected and not found at their run: {sorted(missed) or 'none'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nights", type=int, default=60)
    p.add_argument("--graphs", type=int, default=200)
    p.add_argument("--postgres", metavar="URL")
    args = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="history-"))
    runs = write_history(folder / "runs", nights=args.nights, graphs=args.graphs)
    measure(str(folder / "h.duckdb"), runs)
    if args.postgres:
        measure(args.postgres, runs)


if __name__ == "__main__":
    main()

"""PostgreSQL and DuckDB give the same answers on the same history: a real server (Debian's postgresql,
started by the test; .ci/run installs it), the same import and the same step changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_server import binaries, postgres_server
from synthetic_history import Injected, write_history

from hipdnn_trace.errors import UserError
from hipdnn_trace.history.importer import import_runs
from hipdnn_trace.history.series import changes_in, load_series
from hipdnn_trace.history.store import Store

pytestmark = pytest.mark.skipif(binaries() is None, reason="PostgreSQL is not installed (apt-get install postgresql)")
STEPS = (Injected(2, 20, 1.02), Injected(9, 35, 1.05), Injected(17, 48, 1.20))


@pytest.fixture(scope="module")
def server() -> str:
    pytest.importorskip("psycopg")
    with postgres_server() as url:
        yield url


def _answers(store: Store, runs: list[Path]) -> tuple:
    first = import_runs(store, runs)
    again = import_runs(store, runs)
    changes = changes_in(load_series(store))
    count, total = store.sql("SELECT count(*), sum(median_ms) FROM results")[0]
    return (len(first.imported), first.rows, len(again.skipped), int(count), round(float(total), 6),
            [(c.graph, c.run_id, round(c.ratio, 9), round(c.ratio_low, 9), c.versions_changed) for c in changes])


def test_postgres_and_duckdb_give_the_same_answers(server: str, tmp_path: Path) -> None:
    runs = write_history(tmp_path / "runs", nights=60, graphs=24, steps=STEPS)
    duck = _answers(Store(str(tmp_path / "h.duckdb")), runs)
    pg = _answers(Store(server), runs)
    assert duck == pg
    assert {(g, r) for g, r, *_ in duck[5]} >= {("synthetic_graph_009", "nightly-035"),
                                                 ("synthetic_graph_017", "nightly-048")}


def test_postgres_store_migrates_once_and_a_bad_url_is_one_line(server: str) -> None:
    assert Store(server).version == Store(server).version == 2
    with pytest.raises(UserError, match=r"cannot connect"):
        Store("postgresql://nobody:secret@127.0.0.1:1/none")

"""Reading a results store in tests."""

from __future__ import annotations

from pathlib import Path

from hipdnn_trace.history.store import Store


def rows_in(db: Path | str, query: str) -> list[tuple]:
    store = Store(str(db), create=False)
    try:
        return store.sql(query)
    finally:
        store.close()

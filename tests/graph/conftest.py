"""Fixtures of the graph tests (the small base graphs are in support/graph_samples.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def write_json(tmp_path: Path):
    """Write a JSON value (or raw bytes) to a fresh file and return its path."""
    counter = iter(range(10**6))

    def write(value: Any, name: str | None = None) -> Path:
        path = tmp_path / (name or f"g{next(counter)}.json")
        data = value if isinstance(value, bytes) else json.dumps(value, indent=1).encode()
        path.write_bytes(data)
        return path

    return write

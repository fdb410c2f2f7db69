"""HIPDNN_TRACE_EXTRA_BACKENDS: the one extension point for out-of-tree backends
(used here with the faulty test backend, a stand-in for a vendor's own executor)."""

from __future__ import annotations

import pytest
from reliability_helpers import FAULTY_SPEC, HERE

from hipdnn_trace import backends
from hipdnn_trace.cli import EXTRA_BACKENDS_ENV, main, register_extra_backends
from hipdnn_trace.errors import UserError


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(backends, "REGISTRY", dict(backends.REGISTRY))
    monkeypatch.syspath_prepend(str(HERE))
    return backends.REGISTRY


def test_entries_are_added_and_usable(registry):
    assert register_extra_backends(f" faulty={FAULTY_SPEC} , other=pkg.mod:Cls ") == ["faulty", "other"]
    assert registry["faulty"] == FAULTY_SPEC and registry["other"] == "pkg.mod:Cls"
    assert backends.get("faulty").name == "faulty"


@pytest.mark.parametrize("value, problem", [
    ("faulty", "'faulty' is not name=module:Class"),
    ("faulty=faulty_backend", "'faulty=faulty_backend' is not name=module:Class"),
    ("bad name=a:B", "'bad name=a:B' is not name=module:Class"),
    ("reference=faulty_backend:FaultyBackend", "backend 'reference' already exists"),
])
def test_malformed_entries_are_user_errors(registry, value, problem):
    with pytest.raises(UserError, match=problem):
        register_extra_backends(value)


def test_cli_reports_a_malformed_variable_in_one_line(registry, monkeypatch, capsys):
    monkeypatch.setenv(EXTRA_BACKENDS_ENV, "nonsense")
    assert main(["run", "x.json"]) == 1
    assert capsys.readouterr().err.strip() == \
        f"hipdnn-trace: error: {EXTRA_BACKENDS_ENV}: 'nonsense' is not name=module:Class"


def test_cli_accepts_the_registered_backend(registry, monkeypatch, tmp_path):
    from reliability_helpers import write_graphs

    monkeypatch.setenv(EXTRA_BACKENDS_ENV, f"faulty={FAULTY_SPEC}")
    write_graphs(tmp_path / "g", ["ok__a"])
    assert main(["run", str(tmp_path / "g"), "--backend", "faulty", "-w", "0", "-i", "1",
                 "--out", str(tmp_path), "--run-id", "r", "-q"]) == 0

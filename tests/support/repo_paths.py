"""Where things are, for tests at any depth: the checkout, its sample graphs, the tests' own data
files, and the upstream fixtures beside the checkout (read in place, never copied)."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
GRAPHS = REPO / "graphs"
#: The tests' own data files (tests/data/<kind>/...).
TEST_DATA = TESTS / "data"
#: Upstream data beside the repo: tests skip when it is absent.
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"

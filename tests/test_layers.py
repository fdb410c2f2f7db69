"""Imports that run back up the floors, counted from the source (docs/architecture.md).

A graph flows graph -> backends -> bench -> results -> trace/compare/report, and each floor knows
nothing of the floors above it. This counts every import from a lower floor to a higher one,
module-level or deferred inside a function (the scanner of test_import_cycles.py: a deferred import
hides a dependency from the interpreter, not from a reader; only ``if TYPE_CHECKING:`` imports,
which never run, are skipped). A few stay allowed, each listed with its reason; a new one fails.
"""

from __future__ import annotations

from test_import_cycles import import_graph

#: the pipeline's floors: a module may import its own floor and the floors below
FLOORS: dict[str, int] = {"graph": 0, "backends": 1, "bench": 2, "results": 3, "trace": 4, "compare": 4,
                          "history": 4}

#: modules beside the pipeline, each given the floor its imports and importers put it on
CROSS_CUTTING: dict[str, tuple[int, str]] = {
    "errors": (-1, "the error types every floor raises; imports nothing of the package"),
    "atomic": (-1, "atomic file writes for graph files and run files alike; stdlib only"),
    "read_gate": (-1, "the one gate every file read passes (type, size budget, non-blocking open); stdlib only"),
    "checksums": (-1, "SHA-256 manifests of files reused as truth, read through read_gate"),
    "backend_registry": (-1, "backend names and their modules as strings, read before numpy loads; imports nothing"),
    "device": (-1, "clocks, timers, GPU visibility: needed by backends and bench, knows no graph"),
    "markers_base": (-1, "phase-marker names shared by both marker modules"),
    "markers_roctx": (-1, "roctx phase markers, imported by markers and the AMD profilers"),
    "markers": (-1, "NVTX phase markers around bench's iterations; imports device only"),
    "validate": (1, "compares outputs with graph types; backends poison outputs with it"),
    "profilers": (4, "turns profiler output into results' frames and trace tracks"),
    "console": (4, "prints bench's records and results' statistics for the commands"),
    "runs": (5, "a run's request, plan and measurement: wires every floor for commands/run.py and the API"),
    "commands": (5, "one module per subcommand: wires every floor"),
    "cli": (5, "wires the commands"),
    "api": (5, "the Python entry point over commands and results"),
    "__main__": (5, "python -m hipdnn_trace"),
}

#: (importer, imported) -> why it stays; at most 3. All three are results using trace/'s Perfetto
#: codec (writer, reader), which knows nothing of runs: results owns the run's trace.pftrace file.
#: They go away only if the codec gets a floor below results, a change to the agreed floor order.
ALLOWED: dict[tuple[str, str], str] = {
    ("hipdnn_trace.results.rundir", "hipdnn_trace.trace.writer"):
        "the run directory opens (or appends to, on --resume) its trace.pftrace with the writer",
    ("hipdnn_trace.results.timeline", "hipdnn_trace.trace.writer"):
        "the run's host slices and GPU tracks are drawn on the writer's tracks",
    ("hipdnn_trace.results.merge", "hipdnn_trace.trace.reader"):
        "merging shards cuts each shard's trace at its last complete packet (valid_prefix)",
}

MAX_ALLOWED = 3


def floor(module: str) -> int:
    """The floor of a package module, by its first name under hipdnn_trace."""
    parts = module.split(".")
    if len(parts) == 1:
        return 5   # the package's own __init__: the public API, above everything
    if parts[1] in FLOORS:
        return FLOORS[parts[1]]
    if parts[1] in CROSS_CUTTING:
        return CROSS_CUTTING[parts[1]][0]
    raise AssertionError(f"{module}: give it a floor in FLOORS or CROSS_CUTTING")


def back_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every (importer, imported) where the imported module sits on a higher floor."""
    return sorted((m, t) for m, targets in graph.items() for t in targets if floor(t) > floor(m))


def test_back_import_finder_counts_an_upward_import() -> None:
    graph = {"hipdnn_trace.graph.write": {"hipdnn_trace.results.rundir", "hipdnn_trace.errors"},
             "hipdnn_trace.results.rundir": {"hipdnn_trace.graph.write"}}
    assert back_imports(graph) == [("hipdnn_trace.graph.write", "hipdnn_trace.results.rundir")]


def test_every_module_has_a_floor() -> None:
    graph = import_graph()
    assert "hipdnn_trace.bench.loop" in graph and len(graph) > 50
    for module in graph:
        floor(module)


def test_back_imports_are_only_the_allowed_ones() -> None:
    assert len(ALLOWED) <= MAX_ALLOWED
    found = back_imports(import_graph())
    unexpected = [edge for edge in found if edge not in ALLOWED]
    assert unexpected == [], f"imports back up the floors: {unexpected}"
    stale = [edge for edge in ALLOWED if edge not in found]
    assert stale == [], f"allowed but gone, drop from ALLOWED: {stale}"

"""Every op family in graph/families.py has every piece, or says why not.

``missing_pieces`` imports each module an entry names and checks what it provides against the
family's spec: the builder mixin on GraphBuilder, input rules, the reference handlers, each
backend's map (and the layer's own table holding the same functions), the hipDNN node types and
the sample graphs in graphs/generate.py. A broken entry made in this file shows it fails.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from hipdnn_trace.graph import ops
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.families import FAMILIES, Absent, Family
from hipdnn_trace.graph.opspec import OpSpec

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
HAS_TORCH = importlib.util.find_spec("torch") is not None

#: where each layer's modules live (graph -> backends -> bench: a piece names a module of its floor)
LAYER_PACKAGE = {
    "spec": "hipdnn_trace.graph.",
    "builder": "hipdnn_trace.graph.build_",
    "inputs": "hipdnn_trace.bench.",
    "reference": "hipdnn_trace.backends.reference.nodes.",
    "torch": "hipdnn_trace.backends.torch_ops.",
    "cudnn": "hipdnn_trace.backends.cudnn_graph.",
    "hipdnn": "hipdnn_trace.backends.",
}
#: the table each executing layer builds from the entries, and the name of the map in a family module
LAYER_TABLE = {
    "reference": ("hipdnn_trace.backends.reference.executor", "HANDLERS", "HANDLERS"),
    "torch": ("hipdnn_trace.backends.torch_ops", "OPS", "OPS"),
    "cudnn": ("hipdnn_trace.backends.cudnn_graph", "OPS", "OPS"),
}
INPUT_RULES = ("domain", "metadata_value", "derived")
BY_NAME = {f.name: f for f in FAMILIES}


def family(name: str) -> Family:
    return BY_NAME[name]


def _module(path: str, problems: list[str], what: str) -> ModuleType | None:
    try:
        return importlib.import_module(path)
    except ImportError as exc:
        problems.append(f"{what}: {path} does not import ({exc})")
        return None


@cache
def _sample_types() -> dict[str, frozenset[str]]:
    """Node types of each small sample in graphs/generate.py, by its folder (built in fp32)."""
    spec = importlib.util.spec_from_file_location("graphs_generate_families", GRAPHS / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    folders: dict[str, set[str]] = {}
    for stem, recipe in generate.SMALL.items():
        b = generate._b(stem.rsplit("/", 1)[-1], "fp32")
        recipe(b)
        folders.setdefault(stem.split("/", 1)[0], set()).update(n.type for n in b.build().nodes)
    return {k: frozenset(v) for k, v in folders.items()}


def _spec_problems(f: Family) -> tuple[list[str], tuple[str, ...]]:
    problems: list[str] = []
    module = _module(f.spec, problems, "spec")
    specs = getattr(module, "SPECS", None) if module else None
    if module is not None and (not isinstance(specs, tuple) or not specs
                               or not all(isinstance(s, OpSpec) for s in specs)):
        problems.append(f"spec: {f.spec}.SPECS is not a non-empty tuple of OpSpec")
        specs = ()
    types = tuple(s.type for s in specs or ())
    for s in specs or ():
        if f.flops is None and s.flops is None:
            problems.append(f"flops: {s.type} has no FLOP count and the entry does not say why")
        if ops.SPECS.get(s.type) is not s:
            problems.append(f"spec: {s.type} is not the spec graph/ops.py collected")
    return problems, types


def _builder_problems(f: Family) -> list[str]:
    if isinstance(f.builder, Absent):
        return []
    path, _, name = f.builder.partition(":")
    problems: list[str] = []
    module = _module(path, problems, "builder")
    cls = getattr(module, name, None) if module else None
    if module is not None and not isinstance(cls, type):
        problems.append(f"builder: {path} has no class {name!r}")
    elif cls is not None and not issubclass(GraphBuilder, cls):
        problems.append(f"builder: GraphBuilder does not inherit {name} (add it to graph/build.py)")
    elif cls is not None and not any(callable(v) and not k.startswith("_") for k, v in vars(cls).items()):
        problems.append(f"builder: {name} defines no public method")
    return problems


def _inputs_problems(f: Family) -> list[str]:
    if isinstance(f.inputs, Absent):
        return []
    problems: list[str] = []
    module = _module(f.inputs, problems, "inputs")
    if module is not None and not any(callable(getattr(module, r, None)) for r in INPUT_RULES):
        problems.append(f"inputs: {f.inputs} has none of {', '.join(INPUT_RULES)}")
    return problems


def _executor_problems(f: Family, layer: str, types: tuple[str, ...]) -> list[str]:
    """The family module maps every type of the family, and the layer's table holds the same functions."""
    piece = getattr(f, layer)
    table_module, table_name, map_name = LAYER_TABLE[layer]
    table = getattr(importlib.import_module(table_module), table_name)
    if isinstance(piece, Absent):
        return [f"{layer}: {t} is in the layer's table though the entry says it is absent"
                for t in types if t in table]
    problems: list[str] = []
    module = _module(piece, problems, layer)
    mapping = getattr(module, map_name, None) if module else None
    if module is not None and not isinstance(mapping, dict):
        problems.append(f"{layer}: {piece} has no {map_name} dict")
        return problems
    for t in types:
        fn = (mapping or {}).get(t)
        if not callable(fn):
            problems.append(f"{layer}: {piece}.{map_name} does not handle {t}")
        elif table.get(t) is not fn:
            problems.append(f"{layer}: {table_module}.{table_name} does not hold {piece}'s function for {t}")
    extra = set(mapping or {}) - set(types)
    if extra:
        problems.append(f"{layer}: {piece}.{map_name} maps {sorted(extra)}, not types of this family")
    if module is not None and hasattr(module, "check") and not callable(module.check):
        problems.append(f"{layer}: {piece}.check is not callable")
    return problems


def _hipdnn_problems(f: Family, types: tuple[str, ...]) -> list[str]:
    if isinstance(f.hipdnn, Absent):
        return []
    problems: list[str] = []
    module = _module(f.hipdnn, problems, "hipdnn")
    known = getattr(module, "HIPDNN_NODE_TYPES", frozenset()) if module else frozenset()
    return problems + [f"hipdnn: {t} is not in {f.hipdnn}.HIPDNN_NODE_TYPES" for t in types if t not in known]


def _sample_problems(f: Family, types: tuple[str, ...]) -> list[str]:
    if isinstance(f.samples, Absent):
        return []
    built = _sample_types().get(f.samples)
    if built is None:
        return [f"samples: graphs/generate.py's SMALL has no {f.samples}/ graph"]
    return [f"samples: no {f.samples}/ sample has a {t} node" for t in types if t not in built]


def _named_or_absent(piece: object, package: str) -> bool:
    """A module path on its layer's floor, or Absent with a reason."""
    if isinstance(piece, Absent):
        return bool(piece.reason.strip())
    return isinstance(piece, str) and piece.startswith(package)


def missing_pieces(f: Family, *, with_torch: bool = HAS_TORCH) -> list[str]:
    """Every piece ``f`` lacks (empty when the entry is complete)."""
    problems = [f"{layer}: {getattr(f, layer)!r} is neither a module path nor Absent with a reason"
                for layer, package in LAYER_PACKAGE.items() if not _named_or_absent(getattr(f, layer), package)]
    if problems:
        return problems
    spec_problems, types = _spec_problems(f)
    problems += spec_problems + _builder_problems(f) + _inputs_problems(f)
    for layer in (layer for layer in LAYER_TABLE if with_torch or layer != "torch"):
        problems += _executor_problems(f, layer, types)
    return problems + _hipdnn_problems(f, types) + _sample_problems(f, types)


@pytest.mark.parametrize("f", FAMILIES, ids=lambda f: f.name)
def test_every_family_has_every_piece(f: Family) -> None:
    assert missing_pieces(f) == []


def test_every_node_type_belongs_to_one_family() -> None:
    types = [t for f in FAMILIES for t in ops.family_types(f)]
    assert len(types) == len(set(types)) == len(ops.SPECS)
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)


def test_every_spec_op_runs_on_each_executor_or_the_entry_says_why_not() -> None:
    from hipdnn_trace.backends.reference import executor

    tables = {"reference": executor.HANDLERS}
    if HAS_TORCH:
        from hipdnn_trace.backends import torch_ops

        tables["torch"] = torch_ops.OPS
    from hipdnn_trace.backends import cudnn_graph

    tables["cudnn"] = cudnn_graph.OPS
    for node_type, f in ops.FAMILY_OF.items():
        for layer, table in tables.items():
            assert (node_type in table) != isinstance(getattr(f, layer), Absent), (node_type, layer)


def test_a_backend_refuses_a_family_it_lacks_with_the_entrys_reason() -> None:
    from hipdnn_trace.backends.cudnn_graph import plan
    from hipdnn_trace.errors import UnsupportedError

    b = GraphBuilder("pool_on_cudnn")
    b.pool(b.tensor("x", [1, 2, 6, 6]), "AVGPOOL_INCLUDE_PADDING", 2, stride=2, name="pool")
    with pytest.raises(UnsupportedError) as caught:
        plan(b.build())
    assert str(caught.value) == f"ResampleFwd 'pool': {family('resample').cudnn.reason}"   # type: ignore[union-attr]


# ------------------------------------------------------------- the check can fail

BROKEN = {
    "spec module that does not exist": (replace(family("matmul"), spec="hipdnn_trace.graph.no_such_family"),
                                        "spec: hipdnn_trace.graph.no_such_family does not import"),
    "builder GraphBuilder lacks": (replace(family("matmul"), builder="hipdnn_trace.graph.build_norms:LayernormOutputs"),
                                   "builder: GraphBuilder does not inherit LayernormOutputs"),
    "builder class missing": (replace(family("matmul"), builder="hipdnn_trace.graph.build_matmul:NoSuchBuilder"),
                              "builder: hipdnn_trace.graph.build_matmul has no class 'NoSuchBuilder'"),
    "no input rules in the module": (replace(family("matmul"), inputs="hipdnn_trace.bench.counter_rng"),
                                     "inputs: hipdnn_trace.bench.counter_rng has none of"),
    "reference module of another family": (replace(family("matmul"), reference="hipdnn_trace.backends.reference"
                                                   ".nodes.conv"),
                                           "reference: hipdnn_trace.backends.reference.nodes.conv.HANDLERS does "
                                           "not handle MatmulAttributes"),
    "cudnn absent though mapped": (replace(family("matmul"), cudnn=Absent("said absent")),
                                   "cudnn: MatmulAttributes is in the layer's table though the entry says"),
    "an empty reason": (replace(family("custom"), torch=Absent(" ")), "torch: Absent(reason=' ')"),
    "a module on the wrong floor": (replace(family("matmul"), reference="hipdnn_trace.bench.inputs"),
                                    "reference: 'hipdnn_trace.bench.inputs' is neither"),
    "no sample": (replace(family("matmul"), samples="no_such_folder"),
                  "samples: graphs/generate.py's SMALL has no no_such_folder/ graph"),
    "a sample folder without the op": (replace(family("matmul"), samples="conv"),
                                       "samples: no conv/ sample has a MatmulAttributes node"),
    "hipDNN absent from the node types": (replace(family("custom"), spec="hipdnn_trace.graph.matmul",
                                                  flops=None, hipdnn="hipdnn_trace.backends.torch_backend"),
                                          "hipdnn: MatmulAttributes is not in"),
    "a FLOP count missing without a reason": (replace(family("custom"), flops=None),
                                              "flops: CustomOpAttributes has no FLOP count"),
}


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_an_entry_lacking_a_piece_fails_the_check(case: str) -> None:
    broken, expected = BROKEN[case]
    problems = missing_pieces(broken)
    assert any(p.startswith(expected) for p in problems), problems

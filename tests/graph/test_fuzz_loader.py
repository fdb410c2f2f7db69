"""Fuzzing the graph loader: more than 10,000 generated graphs, valid and corrupted,
and every one either loads or is refused with a GraphError, never another exception.

Four streams (graphs fed to the loader add up to FUZZ_TOTAL; each test asserts its
share; several graphs per hypothesis example keep the 10k inside ~30 s on 2 cores):
valid graphs from the builder (conv, matmul, pointwise, norms, reductions with
random dims, dtypes, layouts); those graphs with one structural mutation (a key
deleted or renamed, a value replaced by random JSON, a hostile number or a type
swap); their serialized bytes with byte-level damage (flips, cuts, insertions,
non-UTF-8); and arbitrary JSON values. A graph that loads must also give its
graph_id, FLOPs and bytes (what every report computes first) and everything ``inspect``
shows (notes, every backend's verdict) without an exception.

A fifth stream holds inspect and run to one verdict: each structural mutant small enough to
run goes through ``run``'s per-graph path with the reference; a refused file gives run the
message inspect printed, a graph inspect says the reference can run does not come back
unsupported or errored, and one it says cannot run comes back unsupported with the same reason.

Two more streams hold the other files a user hands in to the same rule: ROCm dnn-benchmarking results
files (the two layouts in tests/data/dnnbench, structurally mutated and byte-damaged, read by compare and
compared) and ``--config`` recipes (generated TOML of run's own keys with hostile values, byte-damaged, and
arbitrary bytes): either a clean result or a one-line UserError, never another exception.

Deterministic (derandomize=True, no example database): CI runs the same 10k cases
every time; set HIPDNN_TRACE_FUZZ_SCALE=10 locally for a longer random search.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.cli import build_parser
from hipdnn_trace.commands.inspect import _Backends, describe
from hipdnn_trace.commands.recipe import recipe_defaults
from hipdnn_trace.compare.dnnbench_input import compare_stats, dnnbench_rows, is_dnnbench
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.ops import graph_bytes, graph_flops
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

SCALE = float(os.environ.get("HIPDNN_TRACE_FUZZ_SCALE", "1"))
#: graphs fed to the loader per stream, and how many of them each hypothesis example makes
COUNTS = {"valid": 2100, "structural": 5400, "bundled": 1600, "bytes": 2600, "json": 400, "agreement": 600,
          "dnb": 1200, "recipe": 1200}
PER_EXAMPLE = {"valid": 3, "structural": 8, "bundled": 8, "bytes": 8, "json": 1, "agreement": 1, "dnb": 4,
               "recipe": 4}
FILE_STREAMS = ("dnb", "recipe")   # files other than graphs: not counted in the loader's 10k
FUZZ_TOTAL = sum(n for stream, n in COUNTS.items() if stream not in FILE_STREAMS)
assert FUZZ_TOTAL >= 10_000
_COUNT = dict.fromkeys(COUNTS, 0)


def _settings(stream: str) -> settings:
    return settings(max_examples=int(COUNTS[stream] * SCALE) // PER_EXAMPLE[stream], deadline=None, database=None,
                    derandomize=SCALE == 1, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


BACKENDS = _Backends()   # each backend loaded once for the whole file


def check(data: bytes, stream: str) -> str:
    """Load ``data``; 'ok' or 'refused'. Any other exception fails the test."""
    _COUNT[stream] += 1
    try:
        graph = load_bytes(data, "fuzz.json")
    except UserError as exc:   # GraphError, or another user-facing refusal: one line naming the file
        message = str(exc)
        assert message.startswith("fuzz.json") and "\n" not in message, message
        return "refused"
    assert graph.graph_id and graph_flops(graph) >= 0 and graph_bytes(graph) >= 0
    info = describe(graph, "fuzz.json", BACKENDS.verdicts(graph))
    assert all(isinstance(note, str) for node in info["nodes"] for note in node["notes"])
    return "ok"


# ------------------------------------------------------------------ valid graphs

DTYPES = ["float", "half", "bfloat16"]
small = st.integers(1, 6)


@st.composite
def built_graphs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["conv", "matmul", "pointwise", "norm", "reduction", "chain"]))
    io = draw(st.sampled_from(DTYPES))
    b = GraphBuilder(f"fuzz_{kind}", io=io)
    if kind == "conv":
        n, c, k, h, w = (draw(small) for _ in range(5))
        r = draw(st.integers(1, 3))
        layout = draw(st.sampled_from(["NCHW", "NHWC"]))
        x = b.tensor("x", [n, c, h + r, w + r], layout=layout)
        wt = b.tensor("w", [k, c, r, r], layout=layout)
        b.conv_fwd(x, wt, pad=draw(st.integers(0, 1)), stride=draw(st.integers(1, 2)))
    elif kind == "matmul":
        batch, m, kk, n = (draw(small) for _ in range(4))
        a = b.tensor("a", [batch, m, kk])
        bb = b.tensor("b", [draw(st.sampled_from([1, batch])), kk, n])
        b.matmul(a, bb)
    elif kind == "pointwise":
        dims = draw(st.lists(small, min_size=1, max_size=5))
        x = b.tensor("x", dims)
        mode = draw(st.sampled_from(["relu_fwd", "add", "mul", "sigmoid_fwd", "tanh_fwd", "abs", "neg"]))
        if mode in ("add", "mul"):
            other = [d if draw(st.booleans()) else 1 for d in dims]
            b.pointwise(mode, x, b.tensor("y", other))
        else:
            b.pointwise(mode, x)
    elif kind == "norm":
        n, c, h, w = (draw(small) for _ in range(4))
        x = b.tensor("x", [n, c, h, w])
        scale = b.tensor("scale", [1, c, 1, 1], dtype="float")
        bias = b.tensor("bias", [1, c, 1, 1], dtype="float")
        b.batchnorm(x, scale, bias)
    elif kind == "reduction":
        dims = [draw(small) for _ in range(draw(st.integers(2, 4)))]
        out = [1 if draw(st.booleans()) else d for d in dims]
        b.reduction(draw(st.sampled_from(["add", "max", "min"])), b.tensor("x", dims), out)
    else:
        dims = [draw(small) for _ in range(draw(st.integers(1, 4)))]
        y = b.tensor("x", dims)
        for i in range(draw(st.integers(2, 5))):
            y = b.pointwise(draw(st.sampled_from(["relu_fwd", "tanh_fwd", "abs"])), y, virtual=True, name=f"p{i}")
        b.pointwise("neg", y, name="last")
    return b.to_json()


@given(built_graphs())
@_settings("valid")
def _valid(graph: dict[str, Any]) -> None:
    assert check(json.dumps(graph).encode(), "valid") == "ok"
    shuffled = {k: graph[k] for k in reversed(list(graph))}   # key order and layout are not meaning
    assert check(json.dumps(shuffled, indent=2).encode(), "valid") == "ok"
    assert check(json.dumps(graph, sort_keys=True, separators=(",", ":")).encode(), "valid") == "ok"


# ------------------------------------------------------------ structural damage
# Hypothesis draws the graph and one seed per example; the seed drives the
# mutations (a hypothesis draw costs ~1 ms, a seeded choice microseconds), so a
# failure still replays from the printed example.

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
HOSTILE_NUMBERS = [0, -1, 2**31, 2**63, 2**64 + 1, 10**30, -(10**30), 1.5, 1e308, True, None, ""]
seeds = st.integers(0, 2**64 - 1)


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-(2**70), 2**70)
    if kind == 3:
        return rng.uniform(-1e300, 1e300)
    if kind == 4:
        return "".join(rng.choice("aZ_09 \u00e9\u4e2d\"\\") for _ in range(rng.randrange(10)))
    if kind == 5:
        return rng.choice(HOSTILE_NUMBERS)
    if kind == 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_random_json(rng, 9) if rng.random() < 0.2 else rng.choice(["uid", "dims", "name", "x"]):
            _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def mutate(text: str, paths: list[tuple], rng: random.Random) -> dict[str, Any]:
    """The graph ``text`` with one node of its JSON tree damaged."""
    g = json.loads(text)
    path = rng.choice(paths)
    parent: Any = g
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    action = rng.choice(["delete", "random", "number", "swap", "duplicate", "rename"])
    if action == "delete":
        del parent[key]
    elif action == "random":
        parent[key] = _random_json(rng)
    elif action == "number":
        parent[key] = rng.choice(HOSTILE_NUMBERS)
    elif action == "swap":
        old = parent[key]
        parent[key] = [old] if not isinstance(old, list) else {"0": old}
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key])))
    elif isinstance(parent, dict):
        parent[f"{key}_x" if rng.random() < 0.5 else str(key).upper()] = parent.pop(key)
    return g


@given(built_graphs(), seeds)
@_settings("structural")
def _structural(graph: dict[str, Any], seed: int) -> None:
    text, paths, rng = json.dumps(graph), _paths(graph)[1:], random.Random(seed)
    for _ in range(PER_EXAMPLE["structural"]):
        check(json.dumps(mutate(text, paths, rng)).encode(), "structural")


# Every bundled graph of every op family (attention, norms, pooling, block scale, MoE... that the
# builder strategy above does not make), damaged the same way.
BUNDLED = sorted((Path(__file__).resolve().parents[2] / "graphs").rglob("*.json"))
bundled_graphs = st.sampled_from(BUNDLED).map(lambda p: json.loads(p.read_text()))


@given(bundled_graphs, seeds)
@_settings("bundled")
def _bundled(graph: dict[str, Any], seed: int) -> None:
    text, paths, rng = json.dumps(graph), _paths(graph)[1:], random.Random(seed)
    for _ in range(PER_EXAMPLE["bundled"]):
        check(json.dumps(mutate(text, paths, rng)).encode(), "bundled")


# ------------------------------------------------------------------ byte damage

INSERTS = [b"\xff", b"\xc3\x28", b"NaN", b"Infinity", b"[[[[", b'"\\u', b"\x00", b"\xef\xbb\xbf", b"}", b","]


def damage(raw: bytearray, rng: random.Random) -> bytes:
    """``raw`` with 1-4 byte-level injuries: bit flips, cuts, insertions, deletions."""
    for _ in range(rng.randint(1, 4)):
        action = rng.choice(["flip", "cut", "insert", "delete"])
        at = rng.randrange(max(len(raw), 1))
        if action == "flip" and raw:
            raw[at] ^= 1 << rng.randrange(8)
        elif action == "cut":
            del raw[at:]
        elif action == "insert":
            raw[at:at] = rng.choice(INSERTS) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 8))
        elif raw:
            del raw[at:at + rng.randint(1, 16)]
    return bytes(raw)


@given(built_graphs(), st.sampled_from([None, 1]), seeds)
@_settings("bytes")
def _bytes(graph: dict[str, Any], indent: int | None, seed: int) -> None:
    text, rng = json.dumps(graph, indent=indent).encode(), random.Random(seed)
    for _ in range(PER_EXAMPLE["bytes"]):
        check(damage(bytearray(text), rng), "bytes")


# --------------------------------------------------------------- arbitrary JSON

@given(json_values | st.dictionaries(st.sampled_from(["name", "tensors", "nodes", "compute_data_type",
                                                      "io_data_type", "intermediate_data_type"]), json_values,
                                     max_size=4))
@_settings("json")
def _any_json(value: Any) -> None:
    check(json.dumps(value).encode(), "json")


# ------------------------------------------------------- inspect's verdict == run's

#: graphs larger than this are loaded and inspected but not run (a mutated dim can ask for gigabytes)
AGREEMENT_MAX_ELEMENTS = 2**16


def agree(data: bytes) -> None:
    """inspect's verdict on ``data`` and run's outcome for the reference are the same."""
    _COUNT["agreement"] += 1

    def run_reference():   # run's per-graph path, reference only, one iteration
        return run_graph(GraphSource("fuzz.json", lambda: data), [Config("reference", "reference")],
                         RunSettings(loop=LoopSettings(warmup=0, iters=1)), Markers())

    try:
        graph = load_bytes(data, "fuzz.json")
    except UserError as exc:
        refused = run_reference()
        assert refused.status == "error" and refused.error == str(exc), (refused.error, str(exc))
        return
    if sum(t.numel for t in graph.tensors) > AGREEMENT_MAX_ELEMENTS:
        return
    outcome = run_reference()
    verdict = next(v for v in BACKENDS.verdicts(graph) if v.name == "reference")
    [config] = outcome.configs
    if verdict.supported:
        assert config.status not in ("unsupported", "error"), (config.status, config.error)
    else:
        assert config.status == "unsupported" and config.error == verdict.supported_reason, \
            (config.status, config.error, verdict.supported_reason)


@given(built_graphs() | bundled_graphs, seeds)
@_settings("agreement")
def _agreement(graph: dict[str, Any], seed: int) -> None:
    text, paths, rng = json.dumps(graph), _paths(graph)[1:], random.Random(seed)
    agree(json.dumps(mutate(text, paths, rng)).encode())


def _run(name: str, fn) -> None:
    _COUNT[name] = 0
    fn()
    assert _COUNT[name] >= COUNTS[name] * SCALE, f"{name}: only {_COUNT[name]} graphs were fed to the loader"


def test_valid_graphs_load():
    _run("valid", _valid)


def test_structurally_damaged_graphs_load_or_are_refused():
    _run("structural", _structural)


def test_damaged_bundled_graphs_of_every_family_load_or_are_refused():
    _run("bundled", _bundled)


def test_byte_damaged_graphs_load_or_are_refused():
    _run("bytes", _bytes)


def test_arbitrary_json_is_refused_cleanly():
    _run("json", _any_json)


def test_inspect_and_run_agree_on_mutants():
    _run("agreement", _agreement)


# ------------------------------------------------ dnn-benchmarking results files and recipes

DNB = sorted((Path(__file__).resolve().parents[1] / "data" / "dnnbench").glob("*.json"))
dnb_files = st.sampled_from(DNB).map(lambda p: json.loads(p.read_text()))
_FILES = Path(tempfile.mkdtemp(prefix="hipdnn-trace-fuzz-"))
_BASE_ROWS = dnnbench_rows(DNB[0])[1] if DNB else None


def _clean_refusal(exc: UserError, path: Path) -> None:
    message = str(exc)
    assert "\n" not in message and message, message


def check_dnb(data: bytes) -> str:
    """A results file's bytes through compare's reading and statistics: 'ok' or 'refused'."""
    _COUNT["dnb"] += 1
    path = _FILES / "results.json"
    path.write_bytes(data)
    try:
        is_dnnbench(path)
        label, rows = dnnbench_rows(path)
    except UserError as exc:
        _clean_refusal(exc, path)
        assert str(path) in str(exc), str(exc)   # reading errors name the file
        return "refused"
    try:
        compare_stats(_BASE_ROWS, rows, "a", label, threshold=0.05, alpha=0.05, min_coverage=0.0)
    except UserError as exc:   # e.g. nothing in common: still one line
        _clean_refusal(exc, path)
        return "refused"
    return "ok"


@given(dnb_files, seeds)
@_settings("dnb")
def _dnb(results: dict[str, Any], seed: int) -> None:
    text, paths, rng = json.dumps(results), _paths(results)[1:], random.Random(seed)
    for i in range(PER_EXAMPLE["dnb"]):
        mutant = json.dumps(mutate(text, paths, rng))
        check_dnb(damage(bytearray(mutant.encode()), rng) if i % 2 else mutant.encode())


RUN_PARSER = build_parser(["run"])
RUN = next(a for a in RUN_PARSER._subparsers._group_actions if a.dest == "command").choices["run"]  # noqa: SLF001
RECIPE_KEYS = sorted({a.dest for a in RUN._actions if a.dest not in ("help", "config")}   # noqa: SLF001
                     | {"version", "runtime", "engines", "bogus"})
HOSTILE_VALUES = [0, -1, 1, 2**63, 10**17, 1e17, math.nan, math.inf, -math.inf, 0.5, True, False, "", "x",
                  "a\nb", "\x1b[2J", "../../etc", "/dev/zero", "nan", "10", [], [1, 2], ["a", "b"], {"k": 1}]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)   # a TOML basic string takes JSON's escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def recipe_text(rng: random.Random) -> str:
    lines = []
    for key in rng.sample(RECIPE_KEYS, rng.randint(1, 6)):
        value = rng.choice(HOSTILE_VALUES) if rng.random() < 0.7 else _random_json(rng)
        if value is None:
            value = "none"
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def check_recipe(data: bytes) -> str:
    """A recipe's bytes through --config's reading and conversions: 'ok' or 'refused'."""
    _COUNT["recipe"] += 1
    path = _FILES / "recipe.toml"
    path.write_bytes(data)
    try:
        recipe_defaults(path, RUN)
    except UserError as exc:
        _clean_refusal(exc, path)
        assert str(path) in str(exc), str(exc)
        return "refused"
    return "ok"


@given(seeds, st.binary(max_size=64))
@_settings("recipe")
def _recipe(seed: int, noise: bytes) -> None:
    rng = random.Random(seed)
    for i in range(PER_EXAMPLE["recipe"]):
        text = recipe_text(rng).encode()
        check_recipe(text if i == 0 else noise if i == 1 else damage(bytearray(text), rng))


def test_damaged_dnnbench_results_are_read_or_refused_in_one_line():
    _run("dnb", _dnb)


def test_hostile_recipes_are_read_or_refused_in_one_line():
    _run("recipe", _recipe)

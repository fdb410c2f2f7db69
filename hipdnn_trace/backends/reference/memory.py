"""Host memory: what this process may still allocate (the least of what the machine, its rlimits
and its cgroup allow), and what one float64 evaluation of a graph needs.

``/proc/meminfo`` alone says what the machine has free; a job under Slurm or in a container is
stopped much earlier by its cgroup's limit (the OOM killer: SIGKILL, nothing recorded), and a
``ulimit -v`` turns allocations into MemoryError. Every source is optional: what cannot be
read does not count, and None means nothing could be read at all.
"""

from __future__ import annotations

import math
import resource
from pathlib import Path

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention
from hipdnn_trace.graph.model import Graph, Node

__all__ = ["available_memory_bytes", "cached_reference_bytes", "needed_memory_bytes", "validation_memory_bytes"]

_CGROUP_MOUNT = "sys/fs/cgroup"


def available_memory_bytes(root: Path = Path("/")) -> int | None:
    """min(MemAvailable, RLIMIT_AS / RLIMIT_DATA soft limits less what is in use, cgroup v2
    ``memory.max - memory.current`` and v1 ``memory.limit_in_bytes - memory.usage_in_bytes`` of this
    process's cgroup and its ancestors). ``root`` is where ``proc/`` and ``sys/`` are (tests)."""
    found = [v for v in (_meminfo(root), *_rlimits(root), *_cgroups(root)) if v is not None]
    return max(0, min(found)) if found else None


def _meminfo(root: Path) -> int | None:
    for line in _read(root / "proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            return _int(line.split()[1], 1024)
    return None


def _status_kib(root: Path, field: str) -> int:
    """A ``/proc/self/status`` field in bytes (0 when unreadable: the limit itself then counts)."""
    for line in _read(root / "proc/self/status").splitlines():
        if line.startswith(field + ":"):
            return _int(line.split()[1], 1024) or 0
    return 0


def _rlimits(root: Path) -> list[int | None]:
    out: list[int | None] = []
    for limit, used in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft, _ = resource.getrlimit(limit)
        out.append(None if soft == resource.RLIM_INFINITY else soft - _status_kib(root, used))
    return out


def memory_cgroups(root: Path = Path("/")) -> list[tuple[int, Path, str]]:
    """(cgroup version, mount, this process's path in it) of each hierarchy with the memory
    controller: v2 at the mount or under ``unified/`` (hybrid), v1 under ``memory/``."""
    out: list[tuple[int, Path, str]] = []
    mount = root / _CGROUP_MOUNT
    for line in _read(root / "proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            out.extend((2, v2, path) for v2 in (mount, mount / "unified"))
        elif "memory" in controllers.split(","):
            out.append((1, mount / "memory", path))
    return out


def _cgroups(root: Path) -> list[int | None]:
    """Headroom of every cgroup level that limits memory, v2 and v1."""
    out: list[int | None] = []
    for version, mount, path in memory_cgroups(root):
        files = ("memory.max", "memory.current") if version == 2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
        out.extend(_headroom(mount, path, *files))
    return out


def _headroom(mount: Path, path: str, limit_file: str, usage_file: str) -> list[int | None]:
    """limit - usage at the cgroup ``path`` and each ancestor up to the mount. Inside a container the
    path names the host's hierarchy while the mount shows only ours: levels that do not exist are
    skipped, and the mount's own root is always looked at."""
    levels = [mount / p for p in _ancestors(path)]
    out: list[int | None] = []
    for folder in dict.fromkeys([*levels, mount]):
        limit = _read(folder / limit_file).strip()
        if not limit or limit == "max":
            continue
        cap, used = _int(limit), _int(_read(folder / usage_file).strip())
        if cap is not None and cap < 1 << 62:    # v1 writes "no limit" as a huge page-aligned number
            out.append(cap - (used or 0))
    return out


def _ancestors(path: str) -> list[str]:
    parts = [p for p in path.strip().split("/") if p]
    return ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""


def _int(text: str, scale: int = 1) -> int | None:
    try:
        return int(text) * scale
    except ValueError:
        return None


# --------------------------------------------------------------------------- what the reference needs

#: float64 temporaries an element-wise or normalization node holds at once, per output element
_ELEMENTWISE_TEMPS = 2
#: same-sized float64 temporaries of one attention tile's scores alive at once (forward: scores, the
#: masked scores, exp, probabilities; backward adds dO V^T and dS), measured (benchmarks/reference_memory.py)
_SCORE_TEMPS = {False: 5.5, True: 6.0}
#: more of them with an additive mask (its float64 slice, the sum) or a boolean one (bytes, not float64)
_MASK_TEMPS = {"additive": 1.5, "boolean": 0.5, None: 0.0}
#: float64 arrays of one value per query row an attention forward holds (max, sum_exp, stats, temporaries)
_ROW_ARRAYS = 5
#: the attention ops never copy their inputs whole: each tile converts its own slice (ops/sdpa.py)
_READ_IN_TILES = (attention.SDPA, attention.SDPA_BACKWARD)


def needed_memory_bytes(graph: Graph) -> int:
    """Peak host memory of one float64 evaluation beyond the inputs in their own types: a float64
    copy of every input a node other than attention reads and of every pass-by-value scalar (the
    executor fills them all; attention converts one tile's slice at a time), every produced tensor
    twice (exact float64, and stored in its type), the float32 chunk rounding goes through, and the
    largest scratch a node allocates (conv columns, attention tiles, element-wise temporaries). A
    tensor no node reads or writes is never allocated and not counted (a graph with 300k unused
    tensors was refused for 13.7 GiB it never used). Checked against measured peaks
    (tests/backends/reference/test_reference_memory_estimate.py, benchmarks/reference_memory.py)."""
    from hipdnn_trace.backends.reference.ops.rounding import ROUND_CHUNK_ELEMENTS
    from hipdnn_trace.graph.dtypes import DTYPES

    copied = {u for n in graph.nodes if n.type not in _READ_IN_TILES for u in n.input_uids()}
    total = sum(8 * t.numel for t in graph.input_tensors if t.uid in copied)
    total += sum(8 * t.numel for t in graph.value_tensors)
    produced = [t for t in graph.tensors if t.uid in graph.produced_uids]
    total += sum(t.numel * (8 + DTYPES[t.data_type].itemsize) for t in produced)
    total += 4 * min(max((t.numel for t in produced), default=0), ROUND_CHUNK_ELEMENTS)
    return total + max((_scratch_bytes(node, graph) for node in graph.nodes), default=0)


def validation_memory_bytes(graph: Graph, chunk_elements: int, bytes_per_element: int) -> int:
    """Peak of comparing the outputs with the float64 reference, beyond the reference itself: the
    comparison works ``chunk_elements`` at a time (validate/compare.py) with ``bytes_per_element``
    of temporaries each, plus a boolean mask of undefined elements as large as the largest output
    (padded attention rows). The reference is counted by :func:`needed_memory_bytes` (or
    :func:`cached_reference_bytes`); before chunking, validation added ~10 float64 copies of the output."""
    largest = max((t.numel for t in graph.output_tensors), default=0)
    return min(largest, chunk_elements) * bytes_per_element + largest


def cached_reference_bytes(graph: Graph) -> int:
    """The float64 outputs of a reference read from the cache (mapped files: nothing is evaluated)."""
    return sum(8 * t.numel for t in graph.output_tensors)


def _scratch_bytes(node: Node, graph: Graph) -> int:
    try:
        if node.type in ("ConvolutionFwdAttributes", "ConvolutionBwdAttributes", "ConvolutionWrwAttributes"):
            return _conv_scratch(node, graph)
        if node.type in (attention.SDPA, attention.SDPA_BACKWARD):
            return _attention_scratch(node, graph)
    except (KeyError, TypeError, ValueError, UnsupportedError):
        pass   # a node the reference will refuse: the element-wise rule is enough
    outputs = sum(graph.by_uid[u].numel for u in node.output_uids() if u in graph.by_uid)
    return _ELEMENTWISE_TEMPS * 8 * outputs


def _conv_scratch(node: Node, graph: Graph) -> int:
    """The padded float64 input, the largest im2col chunk and its GEMM result (ops/conv.py's chunks)."""
    from hipdnn_trace.backends.reference.ops import conv

    def dims(port: str) -> tuple[int, ...]:
        return tuple(graph.by_uid[node.inputs.get(port) or node.outputs[port]].dims)

    x, w, y = (dims(p) for p in {"ConvolutionFwdAttributes": ("x", "w", "y"),
                                 "ConvolutionBwdAttributes": ("dx", "w", "dy"),
                                 "ConvolutionWrwAttributes": ("x", "dw", "dy")}[node.type])
    p = node.params
    g = conv._geometry(x, w, p["pre_padding"], p["post_padding"], p["stride"], p["dilation"])
    images = max(n1 - n0 for n0, n1 in conv._chunks(g))
    columns = 8 * g.c * g.kernel_size * images * g.out_size
    padded = 8 * g.n * g.c * math.prod(g.padded_spatial)
    result = 8 * g.k * images * g.out_size
    if node.type == "ConvolutionBwdAttributes" and conv._dgrad_as_fprop(g):   # an fprop over dy, through K
        columns = 8 * g.k * g.kernel_size * images * math.prod(g.in_spatial)
        padded += 8 * g.n * g.k * math.prod(g.padded_spatial)
    return padded + columns + 2 * result


def _attention_scratch(node: Node, graph: Graph) -> int:
    """One tile (ops/sdpa.py ``tile_plan``: its scores within the budget; a forward's tile may hold several
    kv heads' groups) with its temporaries, its float64 slices of q, k, v (and dO, O backward; the additive
    mask's slice), paged keys gathered in their own type, and the forward's per-row statistics. Nothing
    here grows with the sequence but the per-row arrays (d_v times smaller than O)."""
    from hipdnn_trace.backends.reference.ops.sdpa import key_chunk, masking_of, tile_plan
    from hipdnn_trace.graph.dtypes import DTYPES

    cfg = attention.config(node, graph)
    masking = masking_of(cfg)
    plan = tile_plan(cfg.group, cfg.heads_kv, cfg.seq_q, cfg.seq_kv, masking, span=not cfg.backward)
    heads, rows = plan.kv_heads * plan.heads, min(plan.rows, max(cfg.seq_q, 1))
    cols = _tile_keys(cfg, rows)
    block = 8 * heads * rows * cols
    temps = _SCORE_TEMPS[cfg.backward] + _MASK_TEMPS.get(cfg.mask_kind, 1.5)
    d = max(cfg.d_qk, cfg.d_v)
    chunk = min(cols, key_chunk(d * plan.kv_heads))
    keys = 8 * chunk * d * plan.kv_heads   # one float64 chunk of k or v, every kv head of the tile
    if cfg.paged:      # gathered first: a chunk's pages of every kv head in the cache's type, and the tile's of them
        itemsize = DTYPES[graph.by_uid[node.inputs["k"]].data_type].itemsize
        keys = max(keys, itemsize * (chunk + cfg.page_size) * (cfg.heads_kv + plan.kv_heads) * d)
    if cfg.backward:   # q, k, v, dO and O slices alive together
        slices = 8 * heads * rows * (cfg.d_qk + 2 * cfg.d_v) + 2 * keys
    else:              # the keys' slice is freed before the values' is made; per-row statistics
        slices = 8 * heads * rows * cfg.d_qk + keys + 8 * _ROW_ARRAYS * cfg.batch * cfg.heads_q * cfg.seq_q
    return int(temps * block) + slices


def _tile_keys(cfg: attention.AttentionConfig, rows: int) -> int:
    """The most keys one tile of ``rows`` query rows sees: all of them, or a sliding window's width."""
    upper = cfg.right_bound if cfg.right_bound is not None else (0 if cfg.causal else None)
    if cfg.left_bound is None or upper is None:
        return cfg.seq_kv
    return max(1, min(cfg.seq_kv, rows + int(cfg.left_bound) + int(upper)))


def memory_refusal(graph: Graph) -> str | None:
    """Why one float64 evaluation of ``graph`` cannot fit in the memory this process may use, or
    None (``prepare`` refuses with it; ``inspect`` shows it)."""
    need, have = needed_memory_bytes(graph), available_memory_bytes()
    if have is None or need <= have:
        return None
    return (f"needs about {need / 2**30:.1f} GiB of host memory for the float64 evaluation, "
            f"{have / 2**30:.1f} GiB available")

"""Small hand-written hipDNN graphs for the harness and AMD-path tests (JSON dicts in hipDNN's layout)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hipdnn_trace.graph.layout import channels_last_order, packed_strides


def tensor(uid: int, name: str, dims: list[int], dtype: str = "float", virtual: bool = False, *,
           nhwc: bool = False) -> dict[str, Any]:
    """A packed tensor entry: NCHW-style strides, or channels-last with ``nhwc``."""
    order = channels_last_order(len(dims)) if nhwc else None
    return {"uid": uid, "name": name, "dims": dims, "strides": list(packed_strides(dims, order)),
            "data_type": dtype, "virtual": virtual}


def matmul(name: str = "mm_small", m: int = 8, k: int = 16, n: int = 4, dtype: str = "float") -> dict[str, Any]:
    return {
        "name": name, "compute_data_type": "float", "io_data_type": dtype, "intermediate_data_type": "float",
        "tensors": [tensor(1, "a", [1, m, k], dtype), tensor(2, "b", [1, k, n], dtype),
                    tensor(3, "c", [1, m, n], dtype)],
        "nodes": [{"name": "mm", "type": "MatmulAttributes", "compute_data_type": "float",
                   "inputs": {"a_tensor_uid": 1, "b_tensor_uid": 2}, "outputs": {"c_tensor_uid": 3}}],
    }


def add_relu(name: str = "add_relu") -> dict[str, Any]:
    """Two nodes through a virtual tensor: bias add with broadcast, then relu."""
    pw = {"relu_lower_clip": None, "relu_upper_clip": None, "relu_lower_clip_slope": None,
          "axis_tensor_uid": None, "swish_beta": None, "elu_alpha": None, "softplus_beta": None}
    return {
        "name": name, "compute_data_type": "float", "io_data_type": "float", "intermediate_data_type": "float",
        "tensors": [tensor(1, "x", [2, 3, 4, 5]), tensor(2, "bias", [1, 3, 1, 1]),
                    tensor(3, "t", [2, 3, 4, 5], virtual=True), tensor(4, "y", [2, 3, 4, 5])],
        "nodes": [
            {"name": "add", "type": "PointwiseAttributes", "compute_data_type": "float",
             "inputs": {"operation": "add", **pw, "in_0_tensor_uid": 1, "in_1_tensor_uid": 2, "in_2_tensor_uid": None},
             "outputs": {"out_0_tensor_uid": 3}},
            {"name": "relu", "type": "PointwiseAttributes", "compute_data_type": "float",
             "inputs": {"operation": "relu_fwd", **pw, "in_0_tensor_uid": 3, "in_1_tensor_uid": None,
                        "in_2_tensor_uid": None},
             "outputs": {"out_0_tensor_uid": 4}},
        ],
    }


def conv(name: str = "conv_small") -> dict[str, Any]:
    return {
        "name": name, "compute_data_type": "float", "io_data_type": "float", "intermediate_data_type": "float",
        "tensors": [tensor(1, "x", [2, 4, 6, 6]), tensor(2, "w", [8, 4, 3, 3]), tensor(3, "y", [2, 8, 6, 6])],
        "nodes": [{"name": "conv", "type": "ConvolutionFwdAttributes", "compute_data_type": "float",
                   "inputs": {"x_tensor_uid": 1, "w_tensor_uid": 2}, "outputs": {"y_tensor_uid": 3},
                   "parameters": {"pre_padding": [1, 1], "post_padding": [1, 1], "stride": [1, 1],
                                  "dilation": [1, 1], "conv_mode": "CROSS_CORRELATION"}}],
    }


def write(folder: Path, graphs: list[dict[str, Any]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for g in graphs:
        path = folder / f"{g['name']}.json"
        path.write_text(json.dumps(g, indent=2))
        paths.append(path)
    return paths


def load_error(graph: Any, edit: Any, source: str = "graph.json") -> str:
    """The loader's one-line error for a built graph after ``edit(node0, tensors)`` mutates its JSON."""
    import pytest

    from hipdnn_trace.errors import GraphError
    from hipdnn_trace.graph.load import parse_graph
    from hipdnn_trace.graph.write import graph_to_json

    raw = graph_to_json(graph)
    edit(raw["nodes"][0], raw["tensors"])
    with pytest.raises(GraphError) as err:
        parse_graph(json.loads(json.dumps(raw)), source)
    return str(err.value)


def write_built(folder: Path, builder: Any) -> Path:
    """A ``GraphBuilder``'s graph as ``folder/<name>.json`` (the folder made if needed)."""
    from hipdnn_trace.graph.write import graph_to_json

    folder.mkdir(parents=True, exist_ok=True)
    graph = builder.build()
    path = folder / f"{graph.name}.json"
    path.write_text(json.dumps(graph_to_json(graph)))
    return path


def sdpa(q_dims: list[int], kv_dims: list[int], *, causal: bool, name: str = "t", **attrs: Any) -> dict[str, Any]:
    """A half SDPA graph (q, k, v of these dims) as hipDNN JSON, with ``attrs`` added to its attributes."""
    from hipdnn_trace.graph.build import GraphBuilder

    b = GraphBuilder(name, io="half")
    q = b.tensor("q", q_dims)
    k, v = b.tensor("k", kv_dims), b.tensor("v", kv_dims)
    b.sdpa(q, k, v, causal=causal)
    raw = b.to_json()
    raw["nodes"][0]["attributes"].update(attrs)
    return raw


def _token_major(dims: list[int]) -> list[int]:
    """[B, H, S, D] dims stored [B, S, H, D]: RFC 0014's ragged layout."""
    _, h, s, d = dims
    return [s * h * d, d, h * d, 1]


def ragged_sdpa(*, batch: int = 3, heads: tuple[int, int] = (4, 2), seq: tuple[int, int] = (7, 9), d: int = 8,
                backward: bool = False, paged: bool = False, dtype: str = "float", causal: bool = False,
                shared: str = "none", multiplier: bool = False, stats: bool = False, page: int = 4,
                name: str = "ragged_sdpa") -> dict[str, Any]:
    """An SDPA (or SdpaBackward) graph in hipDNN's ragged form (RFC 0014): q/k/v/o (and dO/dQ/dK/dV)
    declared [B, H, S_max, D] token-major, each naming an int32 [B + 1, 1, 1, 1] offset tensor.
    ``shared``: "none" (one offset tensor per tensor), "side" (one for the query side, one for the keys)
    or "all" (one for both: self-attention, equal lengths); ``multiplier``: offsets in tokens
    (``ragged_offset_multiplier`` = H * D) instead of elements; ``paged``: K/V as page containers
    (only the query side ragged, seq_len_kv given) in pages of ``page`` tokens."""
    from hipdnn_trace.graph.build import GraphBuilder

    (hq, hkv), (sq, skv) = heads, seq
    b = GraphBuilder(name, io=dtype)
    qd, od = [batch, hq, sq, d], [batch, hq, sq, d]
    q = b.tensor("q", qd, strides=_token_major(qd))
    extra: dict[str, Any] = {}
    if paged:
        pages_per_seq = -(-skv // page)
        container = [batch * pages_per_seq + 1, hkv, page, d]
        k, v = b.tensor("k", container), b.tensor("v", container)
        tk, tv = (b.tensor(n, [batch, 1, pages_per_seq, 1], dtype="int32") for n in ("page_table_k", "page_table_v"))
        extra = {"page_table_k": tk, "page_table_v": tv, "max_seq_len_kv": skv,
                 "seq_len_kv": b.tensor("seq_len_kv", [batch, 1, 1, 1], dtype="int32")}
    else:
        kd = [batch, hkv, skv, d]
        k, v = b.tensor("k", kd, strides=_token_major(kd)), b.tensor("v", kd, strides=_token_major(kd))
    if backward:
        o, do = b.tensor("o", od, strides=_token_major(od)), b.tensor("do", od, strides=_token_major(od))
        st = b.tensor("stats", [batch, hq, sq, 1], dtype="float")
        b.sdpa_backward(q, k, v, o, do, st, causal=causal, scale=0.3)
    else:
        b.sdpa(q, k, v, causal=causal, scale=0.3, stats=stats, **extra)
    raw = b.to_json()
    _add_ragged_offsets(raw, shared, multiplier, paged)
    return raw


def _add_ragged_offsets(raw: dict[str, Any], shared: str, multiplier: bool, paged: bool) -> None:
    """Give the node's packed tensors offset tensors (``ragged_sdpa``)."""
    node = raw["nodes"][0]
    by_uid = {t["uid"]: t for t in raw["tensors"]}
    ports = {**node["inputs"], **node["outputs"]}
    query, keys = ("q", "o", "do", "dq"), () if paged else ("k", "v", "dk", "dv")
    batch = by_uid[ports["q_tensor_uid"]]["dims"][0]
    made: dict[str, int] = {}
    for port in (*query, *keys):
        uid = ports.get(f"{port}_tensor_uid")
        if uid is None:
            continue
        group = {"none": port, "side": "q" if port in query else "k", "all": "qk"}[shared]
        if group not in made:
            made[group] = max(by_uid) + 1
            by_uid[made[group]] = {"uid": made[group], "name": f"{group}_ragged_offset", "dims": [batch + 1, 1, 1, 1],
                                   "strides": [1, 1, 1, 1], "data_type": "int32", "virtual": False}
            raw["tensors"].append(by_uid[made[group]])
        t = by_uid[uid]
        t["ragged_offset_tensor_uid"] = made[group]
        if multiplier:
            t["ragged_offset_multiplier"] = t["strides"][2]


def sdpa_generator(dims: list[int], causal: bool = False, dtype: str = "half") -> dict[str, Any]:
    """The graph JSON as generate_sdpa_fwd_golden.py ``build_graph_json`` writes it (uids 0-3 = Q, K, V, O,
    every optional port null, name ""), as in golden_reference_data/quick/SdpaFwd/bhsd/fp16/hd64_causal/
    Small/Small.json (@ 892c346) with the given spelling (the 1.1.0 generator writes ``half``) and dims."""
    optional_in = ("attn_mask", "scale", "seq_len_q", "seq_len_kv", "seed", "offset", "dropout_mask",
                   "dropout_scale", "page_table_k", "page_table_v", "block_mask", "sink_token", "descale_q",
                   "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
    optional_out = ("stats", "max", "sum_exp", "rng_dump", "amax_s", "amax_o")
    strides = list(packed_strides(dims))
    return {"nodes": [{
        "type": "SdpaAttributes", "compute_data_type": "float", "name": "",
        "inputs": {"q_tensor_uid": 0, "k_tensor_uid": 1, "v_tensor_uid": 2,
                   **{f"{n}_tensor_uid": None for n in optional_in}},
        "outputs": {"o_tensor_uid": 3, **{f"{n}_tensor_uid": None for n in optional_out}},
        "attributes": {"generate_stats": None, "alibi_mask": False, "padding_mask": False, "causal_mask": causal,
                       "causal_mask_bottom_right": False, "dropout_probability": None,
                       "attn_scale_value": 1 / math.sqrt(dims[3]), "left_bound": None, "right_bound": None,
                       "max_seq_len_kv": None, "diagonal_alignment": "TOP_LEFT", "mma_core_mode": "float",
                       "implementation": "AUTO"}}],
        "tensors": [{"uid": u, "name": n, "dims": dims, "strides": strides, "data_type": dtype, "virtual": False}
                    for u, n in enumerate("QKVO")],
        "io_data_type": dtype, "compute_data_type": "float", "intermediate_data_type": "float", "name": ""}

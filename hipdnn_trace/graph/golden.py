"""Golden bundles: a graph plus the bytes of its tensors, in hipDNN's own layout.

hipDNN's test harness (``LoadGraphAndTensors.hpp`` in its test_sdk;
docs/hipdnn-format.md section 5) reads ``{Name}.json`` and one ``{Name}.tensor{uid}.bin``
for **every** tensor of the graph: the raw little-endian buffer in the tensor's data
type, laid out by its strides (``1 + sum((dim-1)*stride)`` elements, gaps of padded
layouts included). The files of output tensors hold the expected values. An optional
``{Name}.meta.json`` says who made the data (``format_version`` must be 1).

The same content also fits in one ``.npz`` (graph JSON + ``t<uid>`` arrays) for
Python users. Arrays handed in and out of this module are logical (dims-ordered).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from hipdnn_trace import __version__, read_gate
from hipdnn_trace.checksums import bytes_sha256, manifest_text, read_manifest
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph import dtypes, ragged
from hipdnn_trace.graph.layout import pack, storage_elements, view
from hipdnn_trace.graph.load import load_bytes, load_file, read_graph_file
from hipdnn_trace.graph.model import UID_SUFFIX, Graph, Tensor
from hipdnn_trace.graph.write import dumps

__all__ = [
    "BundleError",
    "BundleWriteError",
    "bundle_paths",
    "bundle_stem",
    "find_bundle",
    "hipdnn_loader_problems",
    "read_bundle",
    "read_meta",
    "read_npz",
    "tensor_path",
    "write_bundle",
    "write_npz",
]

FORMAT_VERSION = 1
#: bytes a .bin may hold past what its tensor's layout needs before it is refused unread
TENSOR_SLACK_BYTES = 64 * 1024 * 1024
#: Meta keys hipDNN's BundleMetadata reads, with the JSON type it expects.
META_STRINGS = ("generator", "generator_version", "generated_at", "gpu_architecture", "rocm_version",
                "reference_source", "reference_source_hash", "reference_strategy", "operation",
                "generation_command", "notes")
META_INTS = ("seed", "minimum_vram_mb")


class BundleError(UserError):
    """A bundle that cannot be read: the message names the file."""


# ------------------------------------------------------------------ names

def bundle_stem(graph: Graph) -> str:
    """The graph's name made safe as a file name (hipDNN uses ``{Name}`` as is)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", graph.label).strip("._")
    return stem[:200] or "graph"


def tensor_path(json_path: Path, uid: int) -> Path:
    """hipDNN's rule: the .json path without its extension, then ``.tensor<uid>.bin``."""
    return json_path.with_name(f"{json_path.with_suffix('').name}.tensor{uid}.bin")


def meta_path(json_path: Path) -> Path:
    return json_path.with_name(f"{json_path.with_suffix('').name}.meta.json")


def checksums_path(json_path: Path) -> Path:
    """``{Name}.sha256``: every file of the bundle with its SHA-256 (``sha256sum -c`` reads it)."""
    return json_path.with_name(f"{json_path.with_suffix('').name}.sha256")


def incomplete_path(json_path: Path) -> Path:
    """``{Name}.incomplete``: there from before the first file of a write until after its last; left
    behind (with the reason) when the write failed or was killed, so the bundle is refused."""
    return json_path.with_name(f"{json_path.with_suffix('').name}.incomplete")


def bundle_paths(folder: str | Path, graph: Graph) -> dict[str, Path]:
    """Where a bundle of ``graph`` in ``folder`` keeps its files."""
    json_path = Path(folder) / f"{bundle_stem(graph)}.json"
    out = {"json": json_path, "meta": meta_path(json_path), "checksums": checksums_path(json_path),
           "incomplete": incomplete_path(json_path)}
    out.update({f"tensor{t.uid}": tensor_path(json_path, t.uid) for t in graph.tensors})
    return out


# -------------------------------------------------------------- tensor bytes

def _host_dtype(t: Tensor) -> np.dtype:
    try:
        return dtypes.numpy_dtype(t.data_type)
    except ValueError:
        raise BundleError(f"tensor {t.uid} ({t.name!r}): data type {t.data_type} has no byte layout "
                          "hipdnn-trace can write or read") from None


def _logical(t: Tensor, array: np.ndarray | Any) -> np.ndarray:
    """``array`` as t's dtype and dims; ValueError on a shape mismatch."""
    arr = np.asarray(array)
    if arr.shape != tuple(t.dims):
        if arr.size == t.numel and arr.ndim <= 1 and t.numel == 1:
            arr = arr.reshape(t.dims)
        else:
            raise ValueError(f"tensor {t.uid} ({t.name!r}) has dims {list(t.dims)}, array has shape {arr.shape}")
    return arr.astype(_host_dtype(t), copy=False)


def bounds_of(t: Tensor, arrays: Mapping[int, np.ndarray]) -> list[int] | None:
    """Token boundaries of a ragged tensor (RFC 0014) from its offset tensor in ``arrays``: its .bin holds
    the packed buffer those offsets describe (graph/ragged.py). None when dense or the offsets are absent."""
    uid = t.ragged_offset_tensor_uid
    if uid is None or uid not in arrays or len(t.dims) != 4:
        return None
    try:
        return ragged.tokens(arrays[uid], t, t.dims[0])
    except ValueError as exc:
        raise BundleError(str(exc)) from None


def to_bytes(t: Tensor, array: np.ndarray, bounds: list[int] | None = None) -> bytes:
    """Raw little-endian bytes of ``array`` laid out by t's strides (hipDNN's .bin content); a ragged
    tensor packed at its token ``bounds``."""
    arr = _logical(t, array)
    flat = pack(arr, t.strides) if bounds is None else \
        ragged.pack(arr, t, bounds, np.zeros(storage_elements(t.dims, t.strides), arr.dtype))
    item = flat.dtype.itemsize
    return flat.view(np.dtype(f"u{item}")).astype(f"<u{item}", copy=False).tobytes()


def from_bytes(t: Tensor, data: bytes, source: str, bounds: list[int] | None = None) -> np.ndarray:
    """A logical (dims-ordered) array of t from a .bin's bytes; longer files are fine
    (hipDNN copies what the layout needs), shorter ones are refused. A ragged tensor is read from
    its token ``bounds`` (rows past a sequence's length are 0)."""
    host = _host_dtype(t)
    item = host.itemsize
    need = storage_elements(t.dims, t.strides) * item
    if len(data) < need:
        raise BundleError(f"{source}: {len(data)} bytes, tensor {t.uid} ({t.name!r}, {t.data_type} "
                          f"{list(t.dims)} strides {list(t.strides)}) needs {need}")
    raw = np.frombuffer(data, dtype=f"<u{item}", count=need // item)
    flat = raw.astype(f"=u{item}", copy=False).view(host)
    if bounds is not None:
        return ragged.unpack(flat, t, bounds, np.zeros(t.dims, host))
    return np.array(view(flat, t.dims, t.strides), order="C")   # own, writable, dims-ordered


def _value_array(t: Tensor) -> np.ndarray:
    """A by-value scalar as an array of its type (Float8Value holds the raw 8-bit pattern)."""
    if t.value_type == "Float8Value":
        return np.full(t.dims, int(t.value), dtype=np.uint8).view(_host_dtype(t))  # type: ignore[arg-type]
    return _logical(t, np.full(t.dims, t.value))


def _complete(graph: Graph, tensors: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Every tensor's array: by-value scalars from their value, untouched tensors as
    zeros; a tensor a node reads or writes must be given."""
    touched = {u for n in graph.nodes for u in (*n.input_uids(), *n.output_uids(), *graph.reads(n).values())}
    unknown = sorted(set(tensors) - set(graph.by_uid))
    if unknown:
        raise ValueError(f"uids {unknown} are not tensors of graph {graph.label!r}")
    out: dict[int, np.ndarray] = {}
    missing = []
    for t in graph.tensors:
        if t.uid in tensors:
            out[t.uid] = _logical(t, tensors[t.uid])
        elif t.is_value:
            out[t.uid] = _value_array(t)
        elif t.uid not in touched:
            out[t.uid] = np.zeros(t.dims, dtype=_host_dtype(t))
        else:
            missing.append(f"{t.uid} ({t.name})")
    if missing:
        raise ValueError(f"graph {graph.label!r}: no data for tensor(s) {', '.join(missing)}; "
                         "hipDNN's loader needs a file for every tensor")
    return out


# ------------------------------------------------------------------ meta

def make_meta(graph: Graph, *, seed: int | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{Name}.meta.json`` content with hipDNN's key names and types."""
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "generator": "hipdnn-trace",
        "generator_version": __version__,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "reference_source": "hipdnn-trace reference backend (float64, rounded to each tensor's type)",
        "reference_strategy": "cpu_reference",
        "operation": "+".join(graph.ops),
    }
    if seed is not None:
        meta["seed"] = int(seed)
    meta.update(extra or {})
    for key in META_STRINGS:
        if key in meta and not isinstance(meta[key], str):
            raise ValueError(f"meta {key!r} must be a string for hipDNN, got {meta[key]!r}")
    for key in META_INTS:
        if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], int)):
            raise ValueError(f"meta {key!r} must be an integer for hipDNN, got {meta[key]!r}")
    if meta["format_version"] != FORMAT_VERSION:
        raise ValueError(f"meta format_version must be {FORMAT_VERSION}")
    return meta


def read_meta(json_path: str | Path) -> dict[str, Any] | None:
    """The bundle's meta, or None when absent or not format 1 (hipDNN ignores those too)."""
    path = meta_path(Path(json_path))
    if not path.is_file():
        return None
    try:
        meta = read_gate.read_json(path, read_gate.GOLDEN_META)
    except read_gate.ReadRefused as exc:
        raise BundleError(f"{path}: not readable JSON ({exc.problem})") from None
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        return None
    return meta


# ------------------------------------------------------------- write / read

def hipdnn_loader_problems(graph: Graph) -> list[str]:
    """Why hipDNN's bundle loader would refuse this graph, though hipDNN can run it.

    The loader lists outputs as every ``*_tensor_uid`` under each node's ``outputs``
    object, read as an integer: a node without an ``outputs`` object (flat layouts) or
    with an unset (null) optional output makes it throw.
    """
    problems = []
    for i, node in enumerate(graph.nodes):
        sections = {node.param_sections.get(p + UID_SUFFIX, "outputs") for p in node.outputs}
        if "outputs" not in sections:
            problems.append(f"nodes[{i}] ({node.name}): outputs are not under an 'outputs' object")
        nulls = [p for p, u in node.outputs.items() if u is None]
        if nulls:
            problems.append(f"nodes[{i}] ({node.name}): null output(s) {', '.join(nulls)}")
    return problems


class BundleWriteError(OSError):
    """A bundle write that failed: its partial files are removed and its ``.incomplete`` marker left."""


def write_bundle(folder: str | Path, graph: Graph, tensors: Mapping[int, np.ndarray], *,
                 seed: int | None = None, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``{Name}.json``, ``{Name}.tensor{uid}.bin`` for every tensor, ``{Name}.meta.json``
    and ``{Name}.sha256`` (every file's checksum) into ``folder``; returns the .json path.

    ``tensors`` maps uid -> logical array (inputs, expected outputs, virtual
    intermediates). By-value scalars default to their value and tensors no node
    touches to zeros; any other tensor must be given. ``{Name}.incomplete`` is created
    before the first file and removed after the last: a write that fails (a full file
    system) removes what it wrote, leaves the marker with the reason and raises
    :class:`BundleWriteError` naming the file; one that is killed leaves the marker too.
    """
    arrays = _complete(graph, tensors)
    bounds = {t.uid: bounds_of(t, arrays) for t in graph.tensors}
    paths = bundle_paths(folder, graph)
    json_path, marker = paths["json"], paths["incomplete"]
    meta_text = json.dumps(make_meta(graph, seed=seed, extra=meta), indent=4) + "\n"   # bad meta: nothing written
    json_path.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"graph_id": graph.graph_id, "state": "writing"}) + "\n")
    sums: dict[str, str] = {}
    payloads = [*((paths[f"tensor{t.uid}"], lambda t=t: to_bytes(t, arrays[t.uid], bounds[t.uid]))
                  for t in graph.tensors),
                (paths["meta"], meta_text.encode),
                (json_path, lambda: dumps(graph).encode()),
                (paths["checksums"], lambda: manifest_text(sums).encode())]
    for i, (path, payload) in enumerate(payloads):
        data = payload()   # one tensor's bytes in memory at a time
        sums[path.name] = bytes_sha256(data)
        try:
            path.write_bytes(data)
        except OSError as exc:
            _abandon([p for p, _ in payloads[:i + 1]], marker, graph, f"{path.name}: {exc.strerror or exc}")
            raise BundleWriteError(exc.errno, f"{exc.strerror or exc}; the bundle's other files were removed "
                                   f"and {marker.name} left, so --golden refuses it", str(path)) from None
    marker.unlink()
    return json_path


def _abandon(written: list[Path], marker: Path, graph: Graph, why: str) -> None:
    """Remove a failed write's files; keep the marker, saying why (best effort: the disk is full)."""
    for path in written:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        marker.write_text(json.dumps({"graph_id": graph.graph_id, "state": f"failed: {why}"}) + "\n")


def _refuse_incomplete(json_path: Path, graph_id: str | None) -> None:
    """BundleError when the bundle's ``.incomplete`` marker is there (for ``graph_id``, when given)."""
    marker = incomplete_path(json_path)
    if not os.path.lexists(marker):
        return
    try:
        note = read_gate.read_json(marker, read_gate.GOLDEN_META)
    except read_gate.ReadRefused:
        note = None
    if graph_id is not None and isinstance(note, dict) and note.get("graph_id") not in (None, graph_id):
        return   # another graph of the same name
    state = note.get("state") if isinstance(note, dict) else None
    raise BundleError(f"{json_path}: incomplete golden bundle ({marker.name}: {state or 'write did not finish'}); "
                      "save it again with --save-tensors")


def _verified(path: Path, data: bytes, sums: dict[str, str] | None, manifest: Path) -> bytes:
    """``data`` (the bytes of ``path``) when the manifest has no say or agrees, else BundleError."""
    if sums is None:
        return data
    expected = sums.get(path.name)
    if expected is None:
        raise BundleError(f"{path}: not listed in {manifest}; golden data refused")
    if bytes_sha256(data) != expected:
        raise BundleError(f"{path}: does not match its checksum in {manifest} (altered or damaged since it was "
                          "saved); golden data refused")
    return data


def tensor_kind(t: Tensor) -> read_gate.Kind:
    """A .bin may be longer than its layout needs (hipDNN reads the start), within reason."""
    need = storage_elements(t.dims, t.strides) * _host_dtype(t).itemsize
    return read_gate.Kind(read_gate.GOLDEN_TENSOR.what, min(need + TENSOR_SLACK_BYTES, read_gate.GOLDEN_TENSOR.budget))


def read_bundle(json_path: str | Path) -> tuple[Graph, dict[int, np.ndarray]]:
    """The graph and every tensor's logical array (by uid) of a hipDNN bundle.

    A missing .bin is an error naming it, except for by-value scalars (their value is
    in the graph); a .bin shorter than its layout needs is an error (hipDNN would
    silently leave the rest unset), a longer one is read like hipDNN reads it. A bundle
    with a ``.sha256`` manifest (ours) must match it file for file; one left ``.incomplete``
    is refused. Bundles without a manifest (hipDNN's own) are read as they are.
    """
    path = Path(json_path)
    _refuse_incomplete(path, None)
    manifest = checksums_path(path)
    sums = read_manifest(manifest) if os.path.lexists(manifest) else None
    graph = load_bytes(_verified(path, read_graph_file(path), sums, manifest), str(path))
    arrays: dict[int, np.ndarray] = {}
    for t in sorted(graph.tensors, key=lambda t: t.ragged_offset_tensor_uid is not None):   # offsets first
        bin_path = tensor_path(path, t.uid)
        if not os.path.lexists(bin_path):
            if t.is_value and (sums is None or bin_path.name not in sums):
                arrays[t.uid] = _value_array(t)
                continue
            raise BundleError(f"{bin_path}: missing; tensor {t.uid} ({t.name!r}) of {path} "
                              "has no data (a bundle needs a .bin for every tensor)")
        data = _verified(bin_path, read_gate.read_bytes(bin_path, tensor_kind(t)), sums, manifest)
        arrays[t.uid] = from_bytes(t, data, str(bin_path), bounds_of(t, arrays))
    return graph, {t.uid: arrays[t.uid] for t in graph.tensors}


def _store(arr: np.ndarray) -> np.ndarray:
    """npz keeps numpy's own dtypes; bfloat16/fp8 go in as their bits (unsigned ints)."""
    if arr.dtype.kind in "biufc":
        return arr
    return arr.view(np.dtype(f"u{arr.dtype.itemsize}"))


def write_npz(path: str | Path, graph: Graph, tensors: Mapping[int, np.ndarray]) -> Path:
    """One .npz: ``graph`` (the hipDNN JSON text) and ``t<uid>`` logical arrays. Types numpy
    lacks (bfloat16, fp8) are stored as their raw bits; :func:`read_npz` restores them."""
    arrays = _complete(graph, tensors)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {f"t{uid}": _store(a) for uid, a in arrays.items()}
    with path.open("wb") as fh:
        np.savez(fh, graph=np.array(dumps(graph)), **payload)
    return path


def _open_npz(path: Path, *, arrays: bool) -> tuple[Graph, dict[str, np.ndarray]]:
    """The graph of a .npz bundle and, when ``arrays``, its stored arrays by key (np.load
    reads members lazily: without them only the graph is read)."""
    read_gate.check(path, read_gate.GOLDEN_TENSOR)   # a FIFO named .npz would block np.load
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "graph" not in npz.files:
                raise BundleError(f"{path}: no 'graph' entry (not a hipdnn-trace .npz bundle)")
            text = str(npz["graph"])
            stored = {k: npz[k] for k in npz.files if k != "graph"} if arrays else {}
    except (OSError, ValueError, EOFError) as exc:
        raise BundleError(f"{path}: not a readable .npz ({exc})") from None
    return load_bytes(text.encode("utf-8"), f"{path}:graph"), stored


def read_npz(path: str | Path) -> tuple[Graph, dict[int, np.ndarray]]:
    """Inverse of :func:`write_npz`."""
    path = Path(path)
    graph, stored = _open_npz(path, arrays=True)
    arrays: dict[int, np.ndarray] = {}
    for t in graph.tensors:
        key = f"t{t.uid}"
        if key not in stored:
            if t.is_value:
                arrays[t.uid] = _value_array(t)
                continue
            raise BundleError(f"{path}: no array {key} for tensor {t.uid} ({t.name!r})")
        host = _host_dtype(t)
        arr = stored[key]
        if arr.shape != tuple(t.dims) or arr.dtype.itemsize != host.itemsize:
            raise BundleError(f"{path}: {key} is {arr.dtype}{list(arr.shape)}, tensor {t.uid} "
                              f"is {t.data_type}{list(t.dims)}")
        arrays[t.uid] = arr if arr.dtype == host else arr.view(host)
    return graph, arrays


def find_bundle(folder: str | Path, graph: Graph) -> Path | None:
    """The bundle for ``graph`` in ``folder`` (searched recursively): a .json or .npz with
    the graph's file name whose graph_id matches, else any bundle with that graph_id."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    stem = bundle_stem(graph)

    def same(path: Path) -> bool:
        try:
            other = _open_npz(path, arrays=False)[0] if path.suffix == ".npz" else load_file(path)
        except UserError:
            return False
        return other.graph_id == graph.graph_id

    named = sorted(folder.rglob(f"{stem}.json")) + sorted(folder.rglob(f"{stem}.npz"))
    for path in named:
        if same(path):
            return path
    for marker in sorted(folder.rglob(f"{stem}.incomplete")):   # its write failed: refused, not skipped
        _refuse_incomplete(marker.with_suffix(".json"), graph.graph_id)
    for path in sorted(folder.rglob("*.json")):
        if path in named or path.name.endswith(".meta.json"):
            continue
        if graph.tensors and tensor_path(path, graph.tensors[0].uid).is_file() and same(path):
            return path
    for path in sorted(folder.rglob("*.npz")):
        if path not in named and same(path):
            return path
    return None

"""dnn-providers integration-test bundles: a graph with its provenance and (maybe) golden tensors.

Upstream (ROCm/rocm-libraries ``dnn-providers/integration-tests/integration_test_bundles/README.md``
and ``reference_data_scripts/README.md``, commit 508844c / 11792b2) keeps a single-graph bundle as
``{Name}/{Name}.json`` with ``{Name}.meta.json`` (provenance: generator, seed, input_range, ...),
optionally ``{Name}.tensors.dvc`` (a DVC pointer listing the ``.bin`` files kept in S3; older trees
have one ``{Name}.tensor{uid}.bin.dvc`` per file) and, after
``dvc pull``, ``{Name}.tensor{uid}.bin`` (raw little-endian, the tensor's type, laid out by its
strides: ``generate_sdpa_fwd_golden.py`` ``save_tensor_bin``). A sweep case keeps its tensors at
``golden/{id}/tensor{uid}.bin`` (graph/sweeps.py).

:func:`golden_data` decides what a run uses: the bundle's output tensors are the validation
target when present; its input tensors feed the run when present, else its meta's input recipe
when a known generator defines it exactly (:data:`RECIPES`), else seeded inputs (and the golden
outputs are then unusable: said in the notes). Only a DVC pointer: the notes say so and the run
validates against the float64 reference. Bundles this tool writes (with a ``.sha256`` manifest)
are not these: ``--golden`` reads them.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hipdnn_trace import read_gate
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph import dtypes, golden, layout
from hipdnn_trace.graph.dvc_pointer import PointerEntry, read_pointer
from hipdnn_trace.graph.model import Graph, Tensor

__all__ = ["RECIPES", "BundleRef", "GoldenData", "bundle_ref", "golden_data", "is_sidecar"]

#: files beside bundle graphs that are not graphs
SIDECAR_SUFFIXES = (".meta.json", ".support.json")


class BundleMetaError(GraphError):
    """A bundle meta file that cannot be used: names the file and field."""


@dataclass(frozen=True)
class BundleRef:
    """Where one bundle graph's golden tensors and provenance are. ``tensor_prefix`` + ``{uid}.bin``
    is a tensor's file; ``dvc`` the pointer when there is one; ``meta`` the provenance read."""

    origin: str                      # the meta file (or sweep.json#case) the provenance came from
    tensor_prefix: Path
    dvc: Path | None
    meta: Mapping[str, Any] = field(default_factory=dict)
    support: tuple[tuple[str, str, str], ...] = ()   # (engine, gfx arch, os) the support file claims
    support_file: str | None = None

    def tensor_file(self, uid: int) -> Path:
        return self.tensor_prefix.with_name(f"{self.tensor_prefix.name}{uid}.bin")


@dataclass
class GoldenData:
    """What a run of a bundle graph uses: inputs (None: seed them), expected outputs, and notes."""

    inputs: dict[int, np.ndarray] | None
    outputs: dict[int, np.ndarray]
    notes: list[str]
    state: str = "used"              # the summary's golden column: used | dvc-only | unusable | none


def is_sidecar(path: Path) -> bool:
    """A bundle's provenance / support file, never a graph."""
    return path.name in ("meta.json", "support.json") or path.name.endswith(SIDECAR_SUFFIXES)


def _check_meta(meta: Any, origin: str) -> dict[str, Any]:
    """The meta fields this tool uses, type-checked (one-line errors naming the field)."""
    if not isinstance(meta, dict):
        raise BundleMetaError(origin, "$", "must be a JSON object")
    seed = meta.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BundleMetaError(origin, "$.seed", f"{seed!r}: must be an integer")
    rng = meta.get("input_range")
    if rng is not None:
        ok = (isinstance(rng, list) and len(rng) == 2
              and all(isinstance(v, int | float) and not isinstance(v, bool) for v in rng))
        if not ok or not rng[0] < rng[1]:
            raise BundleMetaError(origin, "$.input_range", f"{rng!r}: must be [low, high] numbers with low < high")
    gen = meta.get("generator")
    if gen is not None and not isinstance(gen, str):
        raise BundleMetaError(origin, "$.generator", f"{gen!r}: must be a string")
    return meta


def bundle_ref(json_path: Path) -> BundleRef | None:
    """The bundle around ``{Name}.json`` when it is an upstream one (a ``{Name}.meta.json``, a DVC pointer,
    a ``{Name}.support.json`` or ``{Name}.tensor*.bin`` files beside it, and no ``.sha256`` manifest of
    ours), else None."""
    stem = json_path.with_suffix("").name
    meta_file, dvc = json_path.with_name(f"{stem}.meta.json"), json_path.with_name(f"{stem}.tensors.dvc")
    if os.path.lexists(golden.checksums_path(json_path)):
        return None
    if not dvc.is_file():   # the older layout: one pointer per tensor file
        dvc = next(iter(sorted(json_path.parent.glob(f"{glob.escape(stem)}.tensor*.bin.dvc"))), dvc)
    support = json_path.with_name(f"{stem}.support.json")
    bins = any(json_path.parent.glob(f"{glob.escape(stem)}.tensor*.bin"))   # hipDNN's own layout, pulled
    if not (meta_file.is_file() or dvc.is_file() or support.is_file() or bins):
        return None
    meta: dict[str, Any] = {}
    if meta_file.is_file():
        try:
            meta = _check_meta(read_gate.read_json(meta_file, read_gate.GOLDEN_META), str(meta_file))
        except read_gate.ReadRefused as exc:
            raise BundleMetaError(str(meta_file), "", exc.problem) from None
    claims = read_support(support) if support.is_file() else ()
    return BundleRef(str(meta_file), json_path.with_name(f"{stem}.tensor"), dvc if dvc.is_file() else None, meta,
                     claims, str(support) if support.is_file() else None)


def case_ref(origin: str, golden_dir: Path | None, dvc: Path | None, meta: Mapping[str, Any],
             support: Path | None = None, case: str | None = None) -> BundleRef | None:
    """A sweep case's bundle (graph/sweeps.py ``SweepCase``): its golden pointer and the sweep's
    ``support.json`` claims for it; None when it has neither."""
    claims = read_support(support, case) if support is not None and support.is_file() else None
    if golden_dir is None and claims is None:
        return None
    prefix = (golden_dir or Path(origin).parent / "golden" / str(case)) / "tensor"
    return BundleRef(origin, prefix, dvc if dvc is not None and dvc.is_file() else None,
                     _check_meta(dict(meta), origin), claims or (), str(support) if claims is not None else None)


# ---------------------------------------------------------------- support claims

def read_support(path: Path, case: str | None = None) -> tuple[tuple[str, str, str], ...]:
    """The (engine, arch, os) triples a support file claims, for one sweep case when ``case`` is given.

    Single-graph ``{Name}.support.json``: ``{"version": 1, "claims": {ENGINE: {arch: [os, ...]}}}``;
    a sweep's ``support.json``: ``{"claims": {ENGINE: [{"cases": [id, ...], "support": {arch: [os]}}]}}``
    (ROCm/rocm-libraries dnn-providers/integration-tests/integration-test-bundles, e.g.
    ``quick/BatchnormFwdInference/nchw/fp32/MIOpen/MIOpen.support.json`` @ e59c9d4 and
    ``quick/Pointwise/Default/support.json`` @ 3987abd)."""
    try:
        doc = read_gate.read_json(path, read_gate.GOLDEN_META)
    except read_gate.ReadRefused as exc:
        raise BundleMetaError(str(path), "", exc.problem) from None
    claims = doc.get("claims") if isinstance(doc, dict) else None
    if not isinstance(claims, dict):
        raise BundleMetaError(str(path), "$.claims", "must be an object of engine -> claims")
    out: list[tuple[str, str, str]] = []
    for engine, body in claims.items():
        groups = body if isinstance(body, list) else [{"cases": None, "support": body}]
        for i, group in enumerate(groups):
            where = f"$.claims.{engine}" + (f"[{i}]" if isinstance(body, list) else "")
            support = group.get("support") if isinstance(group, dict) else None
            cases = group.get("cases") if isinstance(group, dict) else None
            if not isinstance(support, dict) or not all(isinstance(v, list) for v in support.values()):
                raise BundleMetaError(str(path), where, "must map gfx arch -> [os, ...]")
            if case is not None and cases is not None and case not in cases:
                continue
            out.extend((engine, arch, str(os_name)) for arch, oses in support.items() for os_name in oses)
    return tuple(sorted(set(out)))


def support_note(ref: BundleRef) -> str | None:
    """The support file's expectations, as the row's note records them beside our verdicts."""
    if ref.support_file is None:
        return None
    if not ref.support:
        return f"support: {ref.support_file} claims no engine for this graph"
    engines: dict[str, list[str]] = {}
    for engine, arch, os_name in ref.support:
        engines.setdefault(engine, []).append(f"{arch}/{os_name}")
    return f"support: {ref.support_file} claims " + "; ".join(f"{e} on {', '.join(v)}" for e, v in engines.items())


def support_disagreement(ref: BundleRef, arch: str | None, os_name: str, ran: bool, verdict: str) -> str | None:
    """A line when our hipDNN row on ``arch``/``os_name`` disagrees with the support file: it claims an
    engine there and the row did not run, or claims none and it ran. None without a file or an arch."""
    if ref.support_file is None or not arch:
        return None
    base = arch.split(":")[0]
    claimed = sorted({e for e, a, o in ref.support if a == base and o == os_name})
    if claimed and not ran:
        return (f"disagreement: {ref.support_file} claims {', '.join(claimed)} on {base}/{os_name}; "
                f"hipdnn here: {verdict}")
    if not claimed and ran:
        return f"disagreement: {ref.support_file} claims no engine on {base}/{os_name}; hipdnn here: {verdict}"
    return None


# ---------------------------------------------------------------- input recipes

def _sdpa_fwd_inputs(graph: Graph, meta: Mapping[str, Any]) -> dict[int, np.ndarray] | None:
    """``generate_sdpa_fwd_golden.py`` (dnn-providers reference_data_scripts, at 3005a4b): one CPU
    ``torch.Generator().manual_seed(seed)``; Q, K, V in that order, each
    ``torch.empty(dims, dtype).uniform_(low, high, generator=rng)``, contiguous (BHSD)."""
    import torch

    nodes = [n for n in graph.nodes if n.op == "Sdpa"]
    if len(nodes) != 1 or "seed" not in meta:
        return None
    low, high = meta.get("input_range", [-1.0, 1.0])
    rng = torch.Generator().manual_seed(int(meta["seed"]))
    out: dict[int, np.ndarray] = {}
    for port in ("q", "k", "v"):
        uid = nodes[0].inputs.get(port)
        t = graph.by_uid.get(uid) if isinstance(uid, int) else None
        host = dtypes.numpy_dtype(t.data_type) if t is not None else None
        kind = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(host.name if host is not None else "")
        if t is None or kind is None or tuple(t.strides) != layout.packed_strides(t.dims):
            return None   # the generator writes contiguous BHSD fp16 / bf16 only
        tt = torch.empty(list(t.dims), dtype=kind)
        tt.uniform_(float(low), float(high), generator=rng)
        out[uid] = tt.view(torch.int16).numpy().view(dtypes.numpy_dtype(t.data_type)).copy()
    return _runtime_scale(graph, nodes[0].inputs.get("scale"), meta, out)


def _runtime_scale(graph: Graph, uid: Any, meta: Mapping[str, Any],
                   out: dict[int, np.ndarray]) -> dict[int, np.ndarray] | None:
    """``generate_sdpa_runtime_scale_test_bundle.py`` (@ 8efc596) draws Q, K, V the same way and wires
    the scale as a runtime float tensor ``[1]`` holding meta ``config.scale_value``."""
    t = graph.by_uid.get(uid) if isinstance(uid, int) else None
    if t is None or t.is_value:
        return out
    config = meta.get("config")
    value = config.get("scale_value") if isinstance(config, Mapping) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None   # a runtime scale whose value the meta does not give
    out[uid] = np.full(t.dims, value, dtype=dtypes.numpy_dtype(t.data_type))
    return out


#: meta ``generator`` -> how it made the inputs, where its source defines that exactly
RECIPES: dict[str, Callable[[Graph, Mapping[str, Any]], dict[int, np.ndarray] | None]] = {
    "generate_sdpa_fwd_golden.py": _sdpa_fwd_inputs,
    "generate_sdpa_runtime_scale_golden.py": _sdpa_fwd_inputs,   # the name its meta writes
}


# ---------------------------------------------------------------- golden data

def _read_tensor(ref: BundleRef, t: Tensor, read: Mapping[int, np.ndarray] | None = None,
                 entries: Mapping[str, PointerEntry] | None = None,
                 stale: list[str] | None = None) -> np.ndarray | None:
    """Tensor ``t``'s golden file, None when absent; a ragged tensor (RFC 0014) from the packed buffer its
    offset tensor (in ``read``) describes. A file the pointer's ``entries`` record an md5 for is hashed as
    read (no second read); one that differs goes to ``stale``."""
    path = ref.tensor_file(t.uid)
    if not path.is_file():
        return None
    try:
        data = read_gate.read_bytes(path, golden.tensor_kind(t))
    except read_gate.ReadRefused as exc:
        raise golden.BundleError(f"{path}: {exc.problem}") from None
    if entries and stale is not None and path.name in entries:
        stale.extend(filter(None, [_md5_differs(path.name, _md5(data), entries)]))
    return golden.from_bytes(t, data, str(path), golden.bounds_of(t, read or {}))


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _recipe_inputs(graph: Graph, ref: BundleRef) -> tuple[dict[int, np.ndarray] | None, str]:
    gen = str(ref.meta.get("generator", ""))
    recipe = RECIPES.get(gen)
    made = recipe(graph, ref.meta) if recipe is not None else None
    if made is not None:
        return made, f"inputs made as {gen} makes them (seed {ref.meta['seed']}, range " \
                     f"{list(ref.meta.get('input_range', [-1.0, 1.0]))}; {ref.origin})"
    why = f"generator {gen!r}" if gen else "no generator named"
    return None, f"inputs seeded by hipdnn-trace: {ref.origin} does not define them exactly ({why})"


def _pointer(ref: BundleRef) -> dict[str, PointerEntry]:
    """The md5s the bundle's DVC pointer(s) record, by file name (the older tree: one pointer a file)."""
    if ref.dvc is None:
        return {}
    if not ref.dvc.name.endswith(".bin.dvc"):
        return read_pointer(ref.dvc)
    out: dict[str, PointerEntry] = {}
    for each in sorted(ref.dvc.parent.glob(f"{glob.escape(ref.tensor_prefix.name)}*.bin.dvc")):
        out.update(read_pointer(each))
    return out


def _md5_differs(name: str, ours: str, entries: Mapping[str, PointerEntry]) -> str | None:
    recorded = entries.get(name)
    if recorded is None or recorded.md5 is None or recorded.md5 == ours:
        return None
    return f"{name}: md5 {ours}, pointer {recorded.md5}"


def _remade_check(ref: BundleRef, graph: Graph, inputs: Mapping[int, np.ndarray],
                  entries: Mapping[str, PointerEntry]) -> tuple[bool | None, str | None]:
    """Whether inputs remade from the bundle's recipe are byte for byte the ones its pointer records
    (None: the pointer records none of them), with the note that says so."""
    differ, compared = [], []
    for t in graph.input_tensors:
        name = ref.tensor_file(t.uid).name
        if t.uid not in inputs or entries.get(name) is None or entries[name].md5 is None:
            continue
        ours = _md5(golden.to_bytes(t, inputs[t.uid]))
        compared.append(name)
        differ.extend(filter(None, [_md5_differs(name, ours, entries)]))
    if not compared:
        return None, None
    if differ:
        return False, (f"inputs remade from the recipe differ from the bundle's golden inputs ({'; '.join(differ)}"
                       f", as {ref.dvc} records them): its golden data was not made by the published recipe")
    return True, f"inputs remade from the recipe are the bundle's golden inputs byte for byte (md5 of " \
                 f"{', '.join(compared)} as {ref.dvc} records them)"


def golden_data(ref: BundleRef, graph: Graph) -> GoldenData:
    """The inputs and expected outputs a run of this bundle graph uses, with notes saying whence."""
    entries = _pointer(ref)
    stale: list[str] = []   # files read that are not the ones the pointer names (edited, or a stale pull)
    ins: dict[int, np.ndarray | None] = {}
    for t in sorted(graph.input_tensors, key=lambda t: t.ragged_offset_tensor_uid is not None):   # offsets first
        if not t.is_value:
            ins[t.uid] = _read_tensor(ref, t, {u: a for u, a in ins.items() if a is not None}, entries, stale)
    have_in = {u: a for u, a in ins.items() if a is not None}
    outs = {t.uid: _read_tensor(ref, t, have_in, entries, stale) for t in graph.output_tensors}
    have_out = {u: a for u, a in outs.items() if a is not None}
    notes: list[str] = []
    remade: bool | None = None
    if len(have_in) == len(ins) and ins:
        inputs: dict[int, np.ndarray] | None = have_in
        notes.append(f"inputs from the bundle's tensor files ({ref.tensor_prefix}*.bin)")
    else:
        inputs, note = _recipe_inputs(graph, ref)
        notes.append(note)
        if inputs is not None:
            remade, checked = _remade_check(ref, graph, inputs, entries)
            notes.extend(filter(None, [checked]))
    if stale:
        notes.append(f"golden: unusable: the bundle's tensor files are not the ones its DVC pointer names "
                     f"({'; '.join(stale)}: an edited file or a stale pull; `dvc status` names them); validated "
                     "against the float64 reference")
        return GoldenData(inputs, {}, notes, "unusable")
    if not have_out:
        where = f"only the DVC pointer {ref.dvc} is here (dvc pull fetches them)" if ref.dvc else "none are here"
        state = "dvc-only" if ref.dvc else "none"
        notes.append(f"golden: {state}: the bundle's golden tensors are not present ({where}); "
                     "validated against the float64 reference")
        return GoldenData(inputs, {}, notes, state)
    if inputs is None or remade is False:
        why = "not the inputs its outputs were computed from" if remade is False else \
            "neither in the bundle nor reproducible"
        notes.append(f"golden: unusable: the bundle's golden outputs are here but its inputs are {why}; "
                     "validated against the float64 reference")
        return GoldenData(inputs, {}, notes, "unusable")
    missing = sorted(set(outs) - set(have_out))
    notes.append(f"golden: expected outputs from {ref.tensor_prefix}*.bin"
                 + (f" (no file for output uid(s) {missing})" if missing else ""))
    return GoldenData(inputs, have_out, notes)

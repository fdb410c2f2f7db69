"""Template sweeps: ``graph.template.json`` + ``sweep.json`` -> one hipDNN graph per case.

dnn-providers' integration tests keep families of graphs as one template whose values are
``"${case.<field>}"`` strings and a ``sweep.json`` listing the cases (``version``, ``cases[]``
with ``id``, ``values``, ``metadata`` and an optional ``golden.path`` to a ``tensors.dvc``).
The substitution rule is upstream's verifier's (``dnn-providers/integration-tests/
reference_data_scripts/verify_golden_bundles.py`` in ROCm/rocm-libraries at 11792b2, and its
README): a placeholder is a whole JSON string; in a tensor entry ``dims`` / ``strides`` /
``data_type`` come from the case's ``values.tensors[]`` entry with that uid; ``attributes.X``
from ``values.attributes.X``; anything else from ``values.X``. A case's tensor uids must be the
template's. Case golden data lives at ``golden/{id}/tensor{uid}.bin`` (beside the pointer).
Every problem is a :class:`SweepError` naming the file and field. docs/hipdnn-format.md
section "Integration-test bundles and sweeps".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import GraphError

__all__ = ["SWEEP_FILE", "TEMPLATE_FILE", "SweepCase", "SweepError", "is_sweep_file", "read_sweep"]

SWEEP_FILE = "sweep.json"
TEMPLATE_FILE = "graph.template.json"
_PLACEHOLDER = re.compile(r"^\$\{case\.([A-Za-z0-9_.]+)\}$")
_CASE_ID = re.compile(r"^[a-z0-9_]+$")
_TENSOR_FIELDS = ("dims", "strides", "data_type")
#: the sweep file itself may be at most this big (upstream's biggest is ~60 kB)
SWEEP = read_gate.Kind("sweep files", 64 * 1024 * 1024)


class SweepError(GraphError):
    """A sweep or template that cannot be expanded: names the file and the field."""


@dataclass(frozen=True)
class SweepCase:
    """One case: its id, the graph JSON (bytes) it expands to, its metadata and where its
    golden tensors would be (``golden/{id}/``), when it names a pointer."""

    case_id: str
    name: str
    graph: bytes
    metadata: dict[str, Any]
    golden_dir: Path | None
    dvc: Path | None


def is_sweep_file(path: Path) -> bool:
    return path.name in (SWEEP_FILE, TEMPLATE_FILE)


def _read(path: Path) -> Any:
    if not path.is_file():
        other = SWEEP_FILE if path.name == SWEEP_FILE else TEMPLATE_FILE
        raise SweepError(str(path), "", f"missing: a template sweep needs both {TEMPLATE_FILE} and {SWEEP_FILE} "
                         f"({other} not found)")
    try:
        value = read_gate.read_json(path, SWEEP)
    except read_gate.ReadRefused as exc:
        raise SweepError(str(path), "", exc.problem) from None
    if not isinstance(value, dict):
        raise SweepError(str(path), "$", "must be a JSON object")
    return value


def _placeholder(value: Any) -> str | None:
    if isinstance(value, str) and "${case." in value:
        m = _PLACEHOLDER.match(value)
        if m is None:
            raise ValueError(f"{value!r}: a placeholder must be the whole string")
        return m.group(1)
    return None


class _Case:
    """One case's substitution state (for messages: the sweep file and the case's place)."""

    def __init__(self, sweep: Path, index: int, case: dict[str, Any]) -> None:
        self.sweep, self.where = str(sweep), f"$.cases[{index}]"
        values = case.get("values")
        if not isinstance(values, dict):
            self.fail("values", "must be an object")
        self.values: dict[str, Any] = values
        self.tensors = self._tensors()

    def fail(self, field: str, problem: str) -> None:
        raise SweepError(self.sweep, f"{self.where}.{field}", problem)

    def _tensors(self) -> dict[int, dict[str, Any]]:
        entries = self.values.get("tensors", [])
        if not isinstance(entries, list):
            self.fail("values.tensors", "must be a list")
        out: dict[int, dict[str, Any]] = {}
        for i, entry in enumerate(entries):
            uid = entry.get("uid") if isinstance(entry, dict) else None
            if not isinstance(uid, int) or isinstance(uid, bool):
                self.fail(f"values.tensors[{i}].uid", "must be an integer")
            if uid in out:
                self.fail(f"values.tensors[{i}].uid", f"duplicate uid {uid}")
            out[uid] = entry
        return out

    def value(self, name: str) -> Any:
        if name.startswith("attributes."):
            attrs = self.values.get("attributes")
            key = name[len("attributes."):]
            if not isinstance(attrs, dict) or key not in attrs:
                self.fail(f"values.attributes.{key}", f"missing (the template uses ${{case.{name}}})")
            return attrs[key]
        if name not in self.values:
            self.fail(f"values.{name}", f"missing (the template uses ${{case.{name}}})")
        return self.values[name]

    def fill(self, node: Any, field: str) -> Any:
        """``node`` with every placeholder replaced (``field``: its JSON path, for messages)."""
        if isinstance(node, dict):
            return {k: self.fill(v, f"{field}.{k}") for k, v in node.items()}
        if isinstance(node, list):
            return [self.fill(v, f"{field}[{i}]") for i, v in enumerate(node)]
        try:
            name = _placeholder(node)
        except ValueError as exc:
            raise SweepError(self.sweep, field, f"in {TEMPLATE_FILE}: {exc}") from None
        return node if name is None else self.value(name)

    def tensor(self, entry: dict[str, Any], i: int) -> dict[str, Any]:
        uid = entry.get("uid")
        own = self.tensors.get(uid) if isinstance(uid, int) else None
        if own is None:
            self.fail("values.tensors", f"no entry for template tensor uid {uid!r}")
        out = {}
        for key, val in entry.items():
            name = _placeholder(val) if key in _TENSOR_FIELDS else None
            if name is not None:
                if key not in own:
                    self.fail(f"values.tensors[uid={uid}].{key}", f"missing (the template's tensors[{i}] uses "
                              f"${{case.{name}}})")
                out[key] = own[key]
            else:
                out[key] = self.fill(val, f"$.tensors[{i}].{key}")
        return out


def _expand_case(template: dict[str, Any], case: _Case) -> dict[str, Any]:
    tensors = template.get("tensors")
    if not isinstance(tensors, list) or not tensors:
        raise SweepError(str(case.sweep).replace(SWEEP_FILE, TEMPLATE_FILE), "$.tensors", "must be a non-empty list")
    out = {k: case.fill(v, f"$.{k}") for k, v in template.items() if k != "tensors"}
    out["tensors"] = [case.tensor(t if isinstance(t, dict) else {}, i) for i, t in enumerate(tensors)]
    extra = sorted(set(case.tensors) - {t.get("uid") for t in tensors if isinstance(t, dict)})
    if extra:
        case.fail("values.tensors", f"uid(s) {extra} are not tensors of {TEMPLATE_FILE}")
    return out


def _case_id(sweep: Path, index: int, case: Any, seen: set[str]) -> str:
    where = f"$.cases[{index}]"
    if not isinstance(case, dict):
        raise SweepError(str(sweep), where, "must be an object")
    cid = case.get("id")
    if not isinstance(cid, str) or not _CASE_ID.match(cid):
        raise SweepError(str(sweep), f"{where}.id", f"{cid!r}: must be a lowercase_snake_case string")
    if cid in seen:
        raise SweepError(str(sweep), f"{where}.id", f"duplicate case id {cid!r}")
    seen.add(cid)
    return cid


def _golden(folder: Path, sweep: Path, index: int, case: dict[str, Any]) -> tuple[Path | None, Path | None]:
    golden = case.get("golden")
    if golden is None:
        return None, None
    path = golden.get("path") if isinstance(golden, dict) else None
    if not isinstance(path, str) or not path.endswith("tensors.dvc"):
        raise SweepError(str(sweep), f"$.cases[{index}].golden.path", "must name a tensors.dvc file")
    pointer = (folder / path)
    if ".." in Path(path).parts or Path(path).is_absolute():
        raise SweepError(str(sweep), f"$.cases[{index}].golden.path", f"{path!r} leaves the sweep's folder")
    return pointer.parent, pointer


def read_sweep(folder: Path) -> list[SweepCase]:
    """Every case of the sweep in ``folder``, expanded to a graph named ``{Operation}_{Topology}.{id}``
    (upstream's test name without the tier), in the file's order."""
    template = _read(folder / TEMPLATE_FILE)
    sweep_path = folder / SWEEP_FILE
    sweep = _read(sweep_path)
    version = sweep.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version != 1:
        raise SweepError(str(sweep_path), "$.version", f"{version!r}: only version 1 is known")
    cases = sweep.get("cases")
    if not isinstance(cases, list) or not cases:
        raise SweepError(str(sweep_path), "$.cases", "must be a non-empty list")
    prefix = f"{folder.resolve().parent.name}_{folder.resolve().name}"
    out, seen = [], set()
    for i, raw in enumerate(cases):
        cid = _case_id(sweep_path, i, raw, seen)
        case = _Case(sweep_path, i, raw)
        graph = _expand_case(template, case)
        graph["name"] = f"{prefix}.{cid}"
        meta = raw.get("metadata", {})
        if not isinstance(meta, dict):
            case.fail("metadata", "must be an object")
        golden_dir, dvc = _golden(folder, sweep_path, i, raw)
        out.append(SweepCase(cid, graph["name"], json.dumps(graph).encode(), meta, golden_dir, dvc))
    return out

"""Template sweeps: ``graph.template.json`` + ``sweep.json`` -> one hipDNN graph per case.

dnn-providers' integration tests keep families of graphs as one template whose values are
``"${case.<path>}"`` strings and a ``sweep.json`` listing the cases (``version``, ``cases[]``
with ``id``, ``values``, ``metadata``, optional ``golden.path`` to a ``tensors.dvc`` and
``tensor_patches``). Expansion is the harness's (ROCm/rocm-libraries ``dnn-providers/integration-tests``
``IntegrationTestBundle.hpp`` ``expandTemplateGraph`` / ``applyTensorPatches`` and ``docs/file-formats.md``
@ 6ed0dc19): a placeholder is a whole string ``${case.<path>}``, ``<path>`` dotted into nested objects;
inside an object with an integer ``uid`` (a tensor) it is looked up first in that uid's entry of
``values.tensors[]``, then in ``values``, except ``dims`` / ``strides`` / ``data_type``, which must come
from the tensor's entry; then each ``tensor_patches`` entry sets, then removes, fields of its tensor.
A case without ``metadata`` is dropped upstream: here it is that case's error row. A sweep that cannot
be read is one error naming the file and field; a case that cannot be expanded is one error row naming
the field, and the other cases run. Case golden data lives at ``golden/{id}/tensor{uid}.bin``.
docs/hipdnn-format.md section "Integration-test bundles and sweeps".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.test_names import sanitize, suite_name

__all__ = ["SWEEP_FILE", "TEMPLATE_FILE", "SweepCase", "SweepError", "is_sweep_file", "read_sweep"]

SWEEP_FILE = "sweep.json"
TEMPLATE_FILE = "graph.template.json"
_PREFIX = "${case."
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
    problem: SweepError | None = None   # why this case cannot be expanded (its row says so; the others run)


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
    """The ``<path>`` of a ``"${case.<path>}"`` string (``placeholderField``: it starts with ``${case.`` and
    ends with ``}``), else None. A string holding one inside other text is literal upstream, and a
    mistake: refused here with the reason."""
    if not isinstance(value, str) or "${case." not in value:
        return None
    if value.startswith(_PREFIX) and value.endswith("}") and len(value) > len(_PREFIX) + 1:
        return value[len(_PREFIX):-1]
    raise ValueError(f"{value!r}: a placeholder must be the whole string")


def _lookup(root: Any, path: str) -> tuple[bool, Any]:
    """``root`` walked along the dotted ``path`` (``lookupJsonPath``): (found, value)."""
    current = root
    for key in path.split("."):
        if not isinstance(current, dict) or key not in current:
            return False, None
        current = current[key]
    return True, current


class _Case:
    """One case's substitution state (for messages: the sweep file and the case's place)."""

    def __init__(self, sweep: Path, index: int, case: dict[str, Any]) -> None:
        self.sweep, self.where = str(sweep), f"$.cases[{index}]"
        self.template = str(sweep.with_name(TEMPLATE_FILE))   # for a template's own problems
        values = case.get("values", {})
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

    def resolve(self, name: str, uid: int | None, field: str) -> Any:
        """``resolvePlaceholder``: the tensor's own entry first, then the case-wide values."""
        if uid is not None:
            found, value = _lookup(self.tensors.get(uid), name)
            if found:
                return value
            if name.split(".")[0] in _TENSOR_FIELDS:
                self.fail(f"values.tensors[uid={uid}].{name}", f"missing (the template's {field} uses "
                          f"${{case.{name}}})")
        found, value = _lookup(self.values, name)
        if not found:
            self.fail(f"values.{name}", f"missing (the template's {field} uses ${{case.{name}}})")
        return value

    def fill(self, node: Any, field: str, uid: int | None = None) -> Any:
        """``node`` with every placeholder replaced (``field``: its JSON path; ``uid``: the tensor it is in)."""
        try:
            name = _placeholder(node)
        except ValueError as exc:
            raise SweepError(self.template, field, str(exc)) from None
        if name is not None:
            return self.resolve(name, uid, field)
        if isinstance(node, list):
            return [self.fill(v, f"{field}[{i}]", uid) for i, v in enumerate(node)]
        if isinstance(node, dict):
            own = node.get("uid")
            inner = own if isinstance(own, int) and not isinstance(own, bool) else uid
            return {k: self.fill(v, f"{field}.{k}", inner) for k, v in node.items()}
        return node

    def patch(self, graph: dict[str, Any], patches: Any) -> None:
        """``applyTensorPatches``: each entry's ``set`` fields upserted, then its ``remove`` fields erased."""
        if patches is None:
            return
        if not isinstance(patches, list):
            self.fail("tensor_patches", "must be a list")
        by_uid = {t.get("uid"): t for t in graph.get("tensors", []) if isinstance(t, dict)}
        for i, entry in enumerate(patches):
            uid = entry.get("uid") if isinstance(entry, dict) else None
            if not isinstance(uid, int) or isinstance(uid, bool):
                self.fail(f"tensor_patches[{i}].uid", "must be an integer")
            if uid not in by_uid:
                self.fail(f"tensor_patches[{i}].uid", f"{uid} is not a tensor of the expanded graph")
            tensor = by_uid[uid]
            if isinstance(entry.get("set"), dict):
                tensor.update(entry["set"])
            for key in entry.get("remove") or []:
                if isinstance(key, str):
                    tensor.pop(key, None)


def _expand_case(template: dict[str, Any], case: _Case, raw: dict[str, Any]) -> dict[str, Any]:
    """One case's graph: placeholders filled, then its tensor patches applied (``expandTemplateGraph``)."""
    tensors = template.get("tensors")
    if not isinstance(tensors, list) or not tensors:
        raise SweepError(case.template, "$.tensors", "must be a non-empty list")
    extra = sorted(set(case.tensors) - {t.get("uid") for t in tensors if isinstance(t, dict)})
    if extra:
        case.fail("values.tensors", f"uid(s) {extra} are not tensors of {TEMPLATE_FILE}")
    out = case.fill(template, "$")
    case.patch(out, raw.get("tensor_patches"))
    return out


def _case_id(sweep: Path, index: int, case: Any, seen: set[str]) -> str:
    where = f"$.cases[{index}]"
    if not isinstance(case, dict):
        raise SweepError(str(sweep), where, "must be an object")
    cid = case.get("id")
    if not isinstance(cid, str) or not cid.strip():
        raise SweepError(str(sweep), f"{where}.id", f"{cid!r}: must be a non-empty string")
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
    """Every case of the sweep in ``folder``, in the file's order, expanded to a graph named as
    dnn-providers names the test (graph/test_names.py: ``{suite}.{id}``, the suite from the tier folder
    on; ``{Operation}_{Topology}.{id}`` when no tier folder holds the sweep). A case that cannot be
    expanded carries its ``problem``; a sweep that cannot be read raises."""
    template = _read(folder / TEMPLATE_FILE)
    sweep_path = folder / SWEEP_FILE
    sweep = _read(sweep_path)
    version = sweep.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version != 1:
        raise SweepError(str(sweep_path), "$.version", f"{version!r}: only version 1 is known")
    cases = sweep.get("cases")
    if not isinstance(cases, list) or not cases:
        raise SweepError(str(sweep_path), "$.cases", "must be a non-empty list")
    where = folder.resolve()
    suite = suite_name(where.parts) or sanitize(f"{where.parent.name}_{where.name}")
    seen: set[str] = set()
    ids = [_case_id(sweep_path, i, raw, seen) for i, raw in enumerate(cases)]
    return [_one_case(folder, sweep_path, template, i, raw, f"{suite}.{sanitize(cid)}", cid)
            for i, (cid, raw) in enumerate(zip(ids, cases, strict=True))]


def _one_case(folder: Path, sweep_path: Path, template: dict[str, Any], index: int, raw: dict[str, Any],
              name: str, cid: str) -> SweepCase:
    try:
        case = _Case(sweep_path, index, raw)
        meta = raw.get("metadata")
        if meta is None:
            case.fail("metadata", "missing (dnn-providers' harness drops a sweep case without its metadata)")
        if not isinstance(meta, dict):
            case.fail("metadata", "must be an object")
        graph = _expand_case(template, case, raw)
        graph["name"] = name
        golden_dir, dvc = _golden(folder, sweep_path, index, raw)
    except SweepError as exc:
        return SweepCase(cid, name, b"", {}, None, None, exc)
    return SweepCase(cid, name, json.dumps(graph).encode(), meta, golden_dir, dvc)

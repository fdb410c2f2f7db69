"""``--config recipe.toml``: a run's flags in a file, as ROCm's dnn-benchmarking reads them.

Precedence is defaults < the file < flags given on the command line. Keys are the long option
names with ``_`` for ``-`` (``iters``, ``backend``, ``torch_sdpa_backend``), plus ``graphs`` (a list
of paths) and ``version`` (1 when present). Relative paths are relative to the file's folder, so a
recipe works from any directory. An unknown key, a wrong type or a value outside an option's
choices is one error naming the file and the key (dnn-benchmarking docs/usage.md "Config files").

dnn-benchmarking renamed its keys (ROCm/dnn-benchmarking @ 03382e30 ``docs/usage.md``): ``runtime``
(was ``backend``) is read as ``backend`` (its ``pytorch`` is our ``torch``); ``trace`` already names our
``--trace/--no-trace``; ``metrics = true`` is what this tool always does (``false`` has no
equivalent); ``hipdnn_cache_dir`` and ``oracle`` have none here and are refused with the reason,
as are the older names ``cache_dir``, ``metrics_tier`` and ``emit_trace``.
"""

from __future__ import annotations

import argparse
import difflib
import tomllib
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError
from hipdnn_trace.history.store import is_postgres

#: options whose values are paths (resolved against the recipe's folder)
PATH_KEYS = ("graphs", "out", "golden", "save_tensors", "resume", "a_path", "b_path")
#: dnn-benchmarking keys with no one-to-one flag here, with what to write instead
FOREIGN = {"engines": "use engine = \"...\" (one engine) or a = \"...\" / b = \"...\" (A/B)",
           "graph": "the key is graphs (a list of paths)", "cache_mode": "the key is cache (warm | cold)",
           "hipdnn_cache_dir": "no equivalent here: hipdnn-trace does not manage hipDNN's kernel cache "
                               "(set HIPDNN_CACHE_DIR in the environment instead)",
           "cache_dir": "no equivalent here (dnn-benchmarking's older name of hipdnn_cache_dir)",
           "oracle": "no equivalent here: no tuned-plan oracle (autotune = true times every engine "
                     "and keeps the fastest)",
           "metrics_tier": "dnn-benchmarking's older name of metrics; FLOPs, bytes and rates are always "
                           "computed here, so leave it out",
           "emit_trace": "dnn-benchmarking's older name: the key is trace (true | false)"}
#: dnn-benchmarking's key -> (our key, its values that we spell differently)
ALIASES: dict[str, tuple[str, dict[Any, Any]]] = {"runtime": ("backend", {"pytorch": "torch"})}
#: dnn-benchmarking's keys for what this tool always does: accepted with that value, else refused
ALWAYS: dict[str, tuple[Any, str]] = {
    "metrics": (True, "FLOPs, bytes and rates are always computed here; metrics = false has no equivalent")}


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions   # argparse has no public listing
            if a.dest not in ("help", "config") and a.help != argparse.SUPPRESS}


def _convert(source: Path, key: str, value: Any, action: argparse.Action) -> Any:
    where = f"{source}: {key}"
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise UserError(f"{where}: expected true or false, got {value!r}")
        return value
    if action.nargs in ("+", "*"):
        if not isinstance(value, list) or not value:
            raise UserError(f"{where}: expected a list, got {value!r}")
        return [_one(where, v, action) for v in value]
    if isinstance(value, (list, dict)):
        raise UserError(f"{where}: expected one value, got {value!r}")
    return _one(where, value, action)


def _one(where: str, value: Any, action: argparse.Action) -> Any:
    if (action.type is None and isinstance(action, (argparse._StoreAction, argparse._AppendAction))
            and not isinstance(value, str)):   # the command line gives such options text
        raise UserError(f"{where}: expected a string, got {value!r}")
    try:
        converted = action.type(str(value)) if callable(action.type) else value
    except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
        raise UserError(f"{where}: {exc}") from None
    if action.choices is not None and converted not in action.choices:
        raise UserError(f"{where}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    return converted


def _translated(path: Path, data: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Our key -> (the key as written, its value): dnn-benchmarking's newest keys as ours
    (``runtime`` -> ``backend``), so errors still name what the file says; the keys for what this
    tool always does dropped when they ask for it, refused when they do not."""
    out: dict[str, tuple[str, Any]] = {}
    for key, value in data.items():
        written = key
        if key in ALWAYS:
            wanted, reason = ALWAYS[key]
            if value is not wanted:
                raise UserError(f"{path}: {key}: {reason}")
            continue
        if key in ALIASES:
            ours, spelled = ALIASES[key]
            if ours in data:
                raise UserError(f"{path}: {key}: give {key} or {ours}, not both (the same option)")
            key, value = ours, spelled.get(value, value) if isinstance(value, str) else value
        out[key] = (written, value)
    return out


def recipe_defaults(path: Path, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The file's values as parser defaults (explicit flags still win), paths made absolute."""
    text = read_gate.read_text(path, read_gate.RECIPE, f"--config {path}")
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UserError(f"--config {path}: not valid TOML: {exc}") from None
    if data.pop("version", 1) != 1:
        raise UserError(f"{path}: version: only version 1 recipes exist")
    actions = _actions(parser)
    out: dict[str, Any] = {}
    for key, (written, value) in _translated(path, data).items():
        if key in FOREIGN:
            raise UserError(f"{path}: {key}: {FOREIGN[key]}")
        if key not in actions:
            guess = difflib.get_close_matches(key, sorted(actions), n=1)
            raise UserError(f"{path}: {written}: unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else ""))
        converted = _convert(path, written, value, actions[key])
        if key == "db" and isinstance(converted, str) and not is_postgres(converted):
            converted = str(path.resolve().parent / converted)   # a DuckDB file, like the path keys
        elif key in PATH_KEYS:
            base = path.resolve().parent
            converted = [str(base / v) for v in converted] if isinstance(converted, list) else base / Path(converted)
        out[key] = converted
    return out


def apply_recipe(parser: argparse.ArgumentParser, sub: argparse.ArgumentParser, argv: list[str],
                 args: argparse.Namespace) -> argparse.Namespace:
    """Re-parse ``argv`` with the recipe's values as the subcommand's defaults."""
    defaults = recipe_defaults(args.config, sub)
    graphs = defaults.pop("graphs", None)
    sub.set_defaults(**defaults)
    again = parser.parse_args(argv)
    if not again.graphs and graphs:
        again.graphs = graphs
    return again

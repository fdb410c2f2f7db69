"""A failed row's rerun: the run's own command line (run.json ``argv``) narrowed to one graph.

Everything that decides the verdict is kept as the run gave it (backend, engine, timing, validation
and tolerance flags, reference device, recipe); what only says where or how much the run wrote, or
which slice of a suite it took, is dropped (graphs, ``--out``, ``--run-id``, ``--resume``,
``--shard``, ``--gpus``, profilers, ``--save-tensors``). Seed, ``--validate`` and the tolerances are
then written explicitly from run.json, so a recipe that set them is not needed to know them. Paths in
the command line are relative to the folder the run started in (run.json ``environment.cwd``) and
are made absolute, so the bundle's ``run.sh`` runs from its own folder.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hipdnn_trace.errors import UserError

#: run options (argparse dests) a one-graph rerun leaves out
DROPPED = frozenset({"out", "run_id", "resume", "shard", "gpus", "profile", "profile_set", "profile_child",
                     "save_tensors", "seed", "validate", "rtol", "atol", "progress"})
#: run options whose value is a path (resolved against the run's folder of origin)
PATHS = frozenset({"config", "golden", "a_path", "b_path", "reference_cache", "plan_cache"})
#: a variable name the shell can export
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: run's --validate choices (commands/run.py), what run.json validation.against records
VALIDATE = ("reference", "none")
#: --reference-cache and --plan-cache values that are not paths
NOT_PATHS = frozenset({"auto", "none"})


def run_subparser() -> argparse.ArgumentParser:
    """``run``'s own parser (its options and how many values each takes)."""
    from hipdnn_trace.cli import build_parser

    parser = build_parser(load=["run"])
    return next(a for a in parser._actions if a.dest == "command").choices["run"]


def _split(token: str, actions: Mapping[str, argparse.Action]) -> tuple[argparse.Action | None, str | None]:
    """The option a token names and the value it carries itself (``--x=1``, ``-w5``)."""
    if token in actions:
        return actions[token], None
    if token.startswith("--") and "=" in token:
        name, value = token.split("=", 1)
        return actions.get(name), value
    if not token.startswith("--") and token[:2] in actions:
        return actions[token[:2]], token[2:]
    return None, None


def options_of(argv: Sequence[str]) -> list[tuple[argparse.Action, str | None, str]]:
    """``run``'s arguments as (action, value, option string as given); positionals (graphs) left out."""
    actions = run_subparser()._option_string_actions
    out: list[tuple[argparse.Action, str | None, str]] = []
    rest = list(argv)
    while rest:
        token = rest.pop(0)
        if token == "--":
            break
        action, value = _split(token, actions) if token.startswith("-") and len(token) > 1 else (None, None)
        if action is None:
            continue   # a graph path
        if value is None and action.nargs != 0:
            value = rest.pop(0) if rest else None
        out.append((action, value, token.split("=", 1)[0] if value is not None and "=" in token else token))
    return out


def _absolute(value: str, cwd: Path | None) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() or cwd is None else cwd / path)


def rerun_flags(meta: Mapping[str, Any], *, engine: str | None = None) -> list[str]:
    """The flags of run.json's command line that a one-graph rerun of the same configuration takes.

    ``engine``: pin this engine where the run chose it per row (``--engine all``, ``--autotune``)."""
    argv = [str(a) for a in meta.get("argv") or []]
    environment = meta.get("environment") if isinstance(meta.get("environment"), dict) else {}
    cwd = environment.get("cwd") if isinstance(environment.get("cwd"), str) else None
    cwd_path = Path(cwd) if cwd else None
    flags: list[str] = []
    pinned = False
    for action, value, option in options_of(argv[2:] if argv[1:2] == ["run"] else argv):
        if action.dest in DROPPED:
            continue
        if engine and (action.dest == "autotune" or (action.dest == "engine" and value == "all")):
            pinned = True
            continue
        if action.dest in PATHS and value is not None and value not in NOT_PATHS:
            value = _absolute(value, cwd_path)
        flags += [action.option_strings[-1] if option not in action.option_strings else option]
        if value is not None and action.nargs != 0:
            flags.append(value)
    if pinned:
        flags += ["--engine", str(engine)]
    return flags + isolation_flags(meta, flags) + verdict_flags(meta)


def isolation_flags(meta: Mapping[str, Any], flags: Sequence[str]) -> list[str]:
    """A suite isolated its graphs (its default on a GPU) where one graph alone would not be: a crash
    or a hang was an error row (exit 1), so the rerun isolates too, with the run's timeout."""
    isolation = meta.get("isolation") or {}
    if not isolation.get("enabled") or any(f in flags for f in ("--isolate", "--no-isolate", "--graph-timeout")):
        return []
    timeout = isolation.get("graph_timeout_s")
    if timeout is None or timeout == 0:
        return ["--isolate"]
    return ["--isolate", "--graph-timeout", repr(_recorded_number(timeout, "isolation.graph_timeout_s",
                                                                  integer=False))]


def environment_block(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """run.json's ``environment`` with each key of the type the run writes (an edited one's others dropped):
    ``cwd`` and ``python`` text, ``variables`` a mapping of text to text; None when there is none."""
    env = meta.get("environment")
    if not isinstance(env, dict):
        return None
    variables = env.get("variables") if isinstance(env.get("variables"), dict) else {}
    return {"cwd": env.get("cwd") if isinstance(env.get("cwd"), str) else None,
            "python": env.get("python") if isinstance(env.get("python"), str) else None,
            "variables": {str(k): str(v) for k, v in variables.items()}}


def _recorded_number(value: Any, where: str, *, integer: bool) -> int | float:
    """A number run.json recorded; one line naming the key when an edit made it something else."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (integer and value != int(value)) or (not integer and value < 0):
        raise UserError(f"run.json: {where} is {value!r}, not a {'whole' if integer else 'finite, non-negative'} "
                        "number (damaged or edited run.json)")
    return int(value) if integer else float(value)


def verdict_flags(meta: Mapping[str, Any]) -> list[str]:
    """Seed, what validates and the tolerances, from run.json (whatever set them)."""
    validation = meta.get("validation") if isinstance(meta.get("validation"), dict) else {}
    seed = _recorded_number(meta.get("seed") or 0, "seed", integer=True)
    against = validation.get("against") or "reference"
    if against not in VALIDATE:   # run.sh would pass it to run's --validate, which refuses it
        raise UserError(f"run.json: validation.against is {against!r}, not one of {', '.join(VALIDATE)} "
                        "(damaged or edited run.json)")
    flags = ["--seed", str(seed), "--validate", against]
    for name in ("rtol", "atol"):
        if validation.get(name) is not None:
            flags += [f"--{name}", repr(_recorded_number(validation[name], f"validation.{name}", integer=False))]
    return flags


#: recorded variables run.sh writes down but never exports: they load code (a shared bundle must not), or
#: choose the tool itself (the caller's own HIPDNN_TRACE does that, never one from run.json)
NOT_EXPORTED = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "HIPDNN_TRACE"})
#: names of the same kind, by shape: the tool's own settings (HIPDNN_TRACE_EXTRA_BACKENDS imports a module,
#: HIPDNN_TRACE_ROCTX_LIB loads a library, HIPDNN_TRACE_NCU / _ROCPROF name programs) and any switch that names
#: a library, plugin, path, folder or program (HIPDNN_PLUGIN_PATH, TORCH_EXTENSIONS_DIR): written down only
LOADS_CODE = re.compile(r"^HIPDNN_TRACE|PATH|LIB|PRELOAD|PLUGIN|DIR|EXTENSION|HOOK|CMD|COMMAND|EXEC|BACKENDS|"
                        r"SCRIPT|MODULE|PROGRAM|FILE")
#: the interpreter that made the run, when it is one: an absolute path to a file named python*
INTERPRETER = re.compile(r"/[^\0\n\r]*/python[0-9.]*")


def _exports(variables: Mapping[str, Any]) -> str:
    """``export`` lines for the recorded variables the run's recording rule keeps (results/environment.py),
    each value quoted; the ones that load code only as comments."""
    from hipdnn_trace.results.environment import matters

    lines = []
    for name, value in variables.items():
        if not isinstance(name, str) or not SHELL_NAME.fullmatch(name) or not matters(name):
            continue
        text = " ".join(str(value).split("\n"))
        if name in NOT_EXPORTED or LOADS_CODE.search(name):
            lines.append(f"# {name}={shlex.quote(text)}   (recorded; not exported: it loads code or picks the tool)")
        else:
            lines.append(f"export {name}={shlex.quote(str(value))}")
    return "".join(line + "\n" for line in lines)


def launcher(interpreter: Any) -> str:
    """How run.sh starts the tool: the caller's HIPDNN_TRACE, else hipdnn-trace on PATH, else the interpreter
    that made the run (``python -m hipdnn_trace``, as on a machine without the console script), else python3."""
    python = interpreter if isinstance(interpreter, str) and INTERPRETER.fullmatch(interpreter) else "python3"
    python = shlex.quote(python)
    return ("tool() {\n"
            '  if [ -n "${HIPDNN_TRACE:-}" ]; then $HIPDNN_TRACE "$@"   # the caller\'s own choice\n'
            '  elif command -v hipdnn-trace >/dev/null 2>&1; then hipdnn-trace "$@"\n'
            f'  elif command -v {python} >/dev/null 2>&1; then {python} -m hipdnn_trace "$@"\n'
            '  else python3 -m hipdnn_trace "$@"; fi\n'
            "}\n")


def run_sh(*, graph_file: str, flags: Sequence[str], variables: Mapping[str, Any], title: str,
           exit_code: int, interpreter: Any = None) -> str:
    """``run.sh``: the recorded environment, then ``hipdnn-trace run`` of the bundle's graph."""
    command = " ".join(shlex.quote(a) for a in flags)
    return (f"#!/bin/sh\n# {title}\n# Reruns it with the run's configuration, seed and validation flags; exits as the\n"
            f"# run did for this row ({exit_code}). REPRO_GRAPH=shrunk/<file> ./run.sh reruns the shrunk graph;\n"
            "# HIPDNN_TRACE='python -m hipdnn_trace' picks another way to start the tool; extra arguments\n"
            "# are appended to the command line (e.g. --out elsewhere).\n"
            'cd "$(dirname "$0")" || exit 1\n'
            f"{_exports(variables)}{launcher(interpreter)}"
            f'tool run "${{REPRO_GRAPH:-{graph_file}}}" {command} --out runs "$@"\n')

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
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: run options (argparse dests) a one-graph rerun leaves out
DROPPED = frozenset({"out", "run_id", "resume", "shard", "gpus", "profile", "profile_set", "profile_child",
                     "save_tensors", "seed", "validate", "rtol", "atol", "progress"})
#: run options whose value is a path (resolved against the run's folder of origin)
PATHS = frozenset({"config", "golden", "a_path", "b_path", "reference_cache"})
#: a variable name the shell can export
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: --reference-cache values that are not paths
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
    cwd = ((meta.get("environment") or {}).get("cwd"))
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
    return ["--isolate"] + (["--graph-timeout", repr(float(timeout))] if timeout else [])


def verdict_flags(meta: Mapping[str, Any]) -> list[str]:
    """Seed, what validates and the tolerances, from run.json (whatever set them)."""
    validation = meta.get("validation") or {}
    flags = ["--seed", str(int(meta.get("seed") or 0)), "--validate", str(validation.get("against") or "reference")]
    for name in ("rtol", "atol"):
        if validation.get(name) is not None:
            flags += [f"--{name}", repr(float(validation[name]))]
    return flags


def run_sh(*, graph_file: str, flags: Sequence[str], variables: Mapping[str, str], title: str,
           exit_code: int) -> str:
    """``run.sh``: the recorded environment, then ``hipdnn-trace run`` of the bundle's graph."""
    exports = "".join(f"export {name}={shlex.quote(str(value))}\n" for name, value in variables.items()
                      if SHELL_NAME.fullmatch(name))
    command = " ".join(shlex.quote(a) for a in flags)
    return (f"#!/bin/sh\n# {title}\n# Reruns it with the run's configuration, seed and validation flags; exits as the\n"
            f"# run did for this row ({exit_code}). REPRO_GRAPH=shrunk/<file> ./run.sh reruns the shrunk graph;\n"
            "# HIPDNN_TRACE='python -m hipdnn_trace' picks another way to start the tool; extra arguments\n"
            "# are appended to the command line (e.g. --out elsewhere).\n"
            'cd "$(dirname "$0")" || exit 1\n'
            f"{exports}"
            f'exec ${{HIPDNN_TRACE:-hipdnn-trace}} run "${{REPRO_GRAPH:-{graph_file}}}" {command} --out runs "$@"\n')

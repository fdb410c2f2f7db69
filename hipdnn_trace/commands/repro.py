"""``hipdnn-trace repro``: a failed or errored row of a run as a bundle someone else can rerun.

A bundle holds the graph (the bytes the run read, checked against the row's graph_id), ``run.sh``
(the run's flags, seed, validation flags and recorded environment variables, narrowed to this one
graph: it exits as the run did for the row, 2 for a validation FAIL, 1 for an error),
``repro.json`` (the same facts as data: row, versions, machine, GPU, environment), a README saying
what failed and how to rerun it, for a backend error a program that calls only that library
(``repro_torch.py``, ``repro_cudnn.py``, ``repro_hipdnn.py``), and with ``--shrink`` the smallest
graph found that keeps the failure (docs/repro.md).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.errors import UnsupportedError, UserError

EXAMPLES = """\
examples:
  hipdnn-trace repro runs/20260101-120000-ab12cd --out bundles/        # every failed/errored row
  hipdnn-trace repro runs/ID gelu_fp16 --out bundles/                   # one graph (name, file or graph_id)
  hipdnn-trace repro runs/ID conv_fwd_1x1_nhwc_fp16 --out b/ --shrink   # also the smallest failing shape
  bundles/gelu_fp16/run.sh; echo $?                                     # the run's verdict again: 2 = FAIL

exit codes: 0 every bundle written, 1 error (no such run, no failed rows, GRAPH not in the run,
            a graph file gone or changed since the run: one line each)
"""

#: statuses a bundle is made for
REPRODUCED = ("failed", "error")
#: a graph file name run.sh may name as it is
SAFE_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
#: what a title keeps: it becomes a shell comment and a Python docstring line
SAFE_TITLE = re.compile(r"[^A-Za-z0-9 _.,:;()+=@/-]")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "repro", help=SUMMARIES["repro"],
        description="Write a bundle for each failed (validation FAIL) or errored row of a run: the graph as "
                    "the run read it, run.sh (same flags, seed, validation and environment; exits as the run "
                    "did for that row), README.md, repro.json, for a backend error a standalone torch / cuDNN / "
                    "hipDNN program, and with --shrink the smallest graph that still fails.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (holds run.json and summary.csv)")
    p.add_argument("graph", nargs="?", metavar="GRAPH",
                   help="only this graph: its name, file name, source path or graph_id (default: every failed "
                        "or errored row, a bundle each)")
    p.add_argument("--out", "-o", type=Path, required=True, metavar="DIR",
                   help="where the bundles go: DIR/<graph>[--<config>]/ (refused if one exists already)")
    p.add_argument("--shrink", action="store_true",
                   help="search smaller shapes that keep the failure (each step reruns the graph in this "
                        "process); the smallest goes to the bundle's shrunk/")
    p.add_argument("--shrink-steps", type=int, default=40, metavar="N", help="at most N graphs tried (default 40)")
    p.add_argument("--shrink-seconds", type=float, default=300.0, metavar="S",
                   help="stop searching after S seconds (default 300)")
    p.set_defaults(main=main)


def _matches(row: Mapping[str, Any], wanted: str) -> bool:
    source = str(row.get("source") or "")
    names = {str(row.get("graph") or ""), str(row.get("graph_id") or ""), source, Path(source.split(":")[-1]).name,
             Path(source.split(":")[-1]).stem}
    return wanted in names or Path(wanted).name in names and Path(wanted).name != ""


def select_rows(rows: Sequence[Mapping[str, Any]], wanted: str | None, folder: Path) -> list[Mapping[str, Any]]:
    """The rows to bundle; a one-line UserError when there are none."""
    if wanted is not None:
        rows = [r for r in rows if _matches(r, wanted)]
        if not rows:
            raise UserError(f"{wanted}: not a graph of the run {folder}")
    chosen = [r for r in rows if r.get("status") in REPRODUCED]
    if not chosen:
        what = f"{wanted} " if wanted is not None else ""
        statuses = ", ".join(sorted({str(r.get("status")) for r in rows})) or "no rows"
        raise UserError(f"{folder}: {what}has no failed or errored row to reproduce ({statuses})")
    return chosen


def bundle_name(row: Mapping[str, Any], configs: int) -> str:
    """``<graph>`` (one configuration) or ``<graph>--<config>``, safe as a folder name."""
    name = str(row.get("graph") or "graph")
    if configs > 1:
        name += f"--{row.get('config')}"
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._") or "graph"


def unique_targets(rows: list[Mapping[str, Any]], out: Path, configs: int) -> list[tuple[Mapping[str, Any], Path]]:
    """One folder per row: two graphs of one name (from two folders) get their graph_ids (or places) added."""
    names = [bundle_name(row, configs) for row in rows]
    seen: dict[str, int] = {}
    targets = []
    for row, name in zip(rows, names):
        if names.count(name) > 1:
            seen[name] = seen.get(name, 0) + 1
            tag = re.sub(r"[^A-Za-z0-9]+", "", str(row.get("graph_id") or "")) or str(seen[name])
            name = f"{name}--{tag}" if f"{name}--{tag}" not in names else f"{name}--{seen[name]}"
        targets.append((row, out / name))
    return targets


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.results.rundir import load_run

    folder = Path(args.run_dir)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    if args.shrink_steps < 1 or not (math.isfinite(args.shrink_seconds) and args.shrink_seconds > 0):
        raise UserError(f"--shrink-steps and --shrink-seconds must be positive and finite (got "
                        f"{args.shrink_steps}, {args.shrink_seconds})")
    run = load_run(folder, strict=True)
    rows = select_rows(run.summary.to_dicts(), args.graph, folder)
    configs = len({r.get("config") for r in run.summary.to_dicts()})
    targets = unique_targets(rows, Path(args.out), configs)
    taken = [str(t) for _, t in targets if t.exists()]
    if taken:
        raise UserError(f"{taken[0]}: already exists; choose another --out or remove it")
    refused = 0
    for row, target in targets:
        try:
            written = write_bundle(run.meta, row, target, run.validation.to_dicts(), args)
        except UserError as exc:
            print(f"hipdnn-trace repro: {row.get('graph')}: {exc}", file=sys.stderr)
            refused += 1
            continue
        except OSError as exc:   # a read-only or full --out: one line, the other bundles still tried
            print(f"hipdnn-trace repro: {target}: cannot write the bundle ({exc.strerror or exc})", file=sys.stderr)
            refused += 1
            continue
        print(f"{target}: {row.get('status')} row of {row.get('graph')} ({row.get('config')}); {written}")
    return 1 if refused else 0


def write_bundle(meta: Mapping[str, Any], row: Mapping[str, Any], target: Path,
                 validation: Sequence[Mapping[str, Any]], args: argparse.Namespace) -> str:
    """The bundle of ``row`` in ``target``; what it holds, in a few words."""
    from hipdnn_trace.bench.suite import exit_code_for
    from hipdnn_trace.commands.repro_flags import environment_block, rerun_flags, run_sh
    from hipdnn_trace.commands.repro_source import graph_bytes

    meta = {**meta, "environment": environment_block(meta)}   # an edited run.json's block of another type: none
    argv = [str(a) for a in meta.get("argv") or []] if isinstance(meta.get("argv"), list) else []
    found = graph_bytes(meta, row, allow_unknown="--allow-unknown-fields" in argv)
    file_name = Path(found.origin.split(":")[-1]).name
    if not SAFE_FILE.fullmatch(file_name):   # run.sh names it: nothing the shell would read as code
        file_name = "graph.json"
    exit_code = exit_code_for([str(row.get("status"))])
    flags = rerun_flags(meta, engine=row.get("engine") or None)
    environment = meta["environment"] or {}
    variables = environment.get("variables") or {}
    title = SAFE_TITLE.sub("_", f"{row.get('graph')} ({row.get('config')}): {str(row.get('status')).upper()} "
                                f"in run {meta.get('run_id')}")   # it heads run.sh and the programs
    target.mkdir(parents=True)
    (target / file_name).write_bytes(found.data)
    script = target / "run.sh"
    script.write_text(run_sh(graph_file=file_name, flags=flags, variables=variables, title=title, exit_code=exit_code,
                             interpreter=environment.get("python")))
    script.chmod(0o755)
    facts: dict[str, Any] = {"title": title, "graph_file": file_name, "source": row.get("source"),
                             "read_from": found.origin, "graph_id": row.get("graph_id"), "verified": found.verified,
                             "exit_code": exit_code, "flags": flags}
    facts["library_script"] = _library_script(meta, row, found.graph, title, target)
    if args.shrink:
        facts["shrink"] = _shrink(found, row, flags, target, file_name, args)
    _write_record(meta, row, facts, target)
    (target / "README.md").write_text(readme(meta, row, facts, [v for v in validation if _same_row(v, row)]))
    held = ["run.sh", file_name] + ([facts["library_script"]["file"]] if facts["library_script"].get("file") else [])
    if facts.get("shrink", {}).get("file"):
        held.append(facts["shrink"]["file"])
    return f"run.sh exits {exit_code}; " + ", ".join(held[1:])


def _same_row(v: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    return v.get("source") == row.get("source") and v.get("config") == row.get("config") and v.get("passed") is False


def _library_script(meta: Mapping[str, Any], row: Mapping[str, Any], graph: Any, title: str,
                    target: Path) -> dict[str, Any]:
    """A standalone program for a backend's error row; why not, otherwise."""
    from hipdnn_trace.commands.repro_scripts import library_script

    if row.get("status") != "error":
        return {"file": None, "why": "only an error row gets one (a FAIL is a numerical verdict of this tool)"}
    try:
        name, text = library_script(meta, row, graph, title)
    except UnsupportedError as exc:
        return {"file": None, "why": str(exc)}
    (target / name).write_text(text)
    return {"file": name, "why": None}


def _shrink(found: Any, row: Mapping[str, Any], flags: list[str], target: Path, file_name: str,
            args: argparse.Namespace) -> dict[str, Any]:
    from hipdnn_trace.commands.repro_shrink import shrink, signature, verdict_of

    if found.graph is None:
        return {"file": None, "stopped": "the graph does not load: nothing to shrink", "steps": []}
    isolate = ["--isolate"] if row.get("status") == "error" and row.get("backend") != "reference" else []
    verdict = verdict_of([*flags, *isolate], row.get("config"))
    result = shrink(found.data, signature(row.get("status"), row.get("error")), verdict,
                    max_steps=args.shrink_steps, max_seconds=args.shrink_seconds)
    if not result.kept:
        return {"file": None, "stopped": result.stopped, "steps": result.steps}
    (target / "shrunk").mkdir()
    (target / "shrunk" / file_name).write_bytes(result.data)
    return {"file": f"shrunk/{file_name}", "stopped": result.stopped, "steps": result.steps}


def _write_record(meta: Mapping[str, Any], row: Mapping[str, Any], facts: Mapping[str, Any], target: Path) -> None:
    record = {"row": {k: row.get(k) for k in ("run_id", "graph", "graph_id", "config", "source", "backend", "engine",
                                              "dtype", "status", "validation", "error")},
              **facts, "argv": meta.get("argv"), "seed": meta.get("seed"), "validation": meta.get("validation"),
              "configs": meta.get("configs"), "versions": meta.get("versions"), "machine": meta.get("machine"),
              "gpu": meta.get("gpu"), "environment": meta.get("environment")}
    (target / "repro.json").write_text(json.dumps(record, indent=2, default=str) + "\n")


def readme(meta: Mapping[str, Any], row: Mapping[str, Any], facts: Mapping[str, Any],
           mismatches: Sequence[Mapping[str, Any]]) -> str:
    """README.md of a bundle: what failed, with what, and how to rerun it."""
    from hipdnn_trace.commands.repro_readme import render

    return render(meta, row, facts, mismatches)

"""A repro bundle's README.md: what failed, on what, and the commands that show it again."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any


def _versions(meta: Mapping[str, Any]) -> str:
    versions = meta.get("versions") or {}
    return ", ".join(f"{k} {v}" for k, v in versions.items()) or "not recorded"


def _environment(meta: Mapping[str, Any]) -> list[str]:
    env = meta.get("environment")
    if not env:
        return ["Not recorded (the run predates run.json's `environment`): run.sh exports nothing."]
    variables = env.get("variables") or {}
    lines = [f"- `{k}={v}`" for k, v in variables.items()] or ["- none of the variables that matter was set"]
    return lines + ["", f"The run started in `{env.get('cwd')}` (relative paths of its command line)."]


def _what_failed(row: Mapping[str, Any], mismatches: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [f"**{str(row.get('status')).upper()}**: {row.get('error') or 'no message recorded'}"]
    for v in mismatches:
        lines.append(f"- output `{v.get('output')}` ({v.get('dtype')}) vs {v.get('against')}: {v.get('message')}")
    return lines


def _script(facts: Mapping[str, Any]) -> list[str]:
    script = facts.get("library_script") or {}
    if script.get("file"):
        return ["## The library alone", "",
                f"`{script['file']}` calls only the library, with this graph's shapes, strides and types "
                "(the calls hipdnn-trace's backend made); attach it to a bug report with the graph:", "",
                f"    python {script['file']}", ""]
    return [f"No standalone library program: {script.get('why')}.", ""]


def _shrink(facts: Mapping[str, Any]) -> list[str]:
    shrink = facts.get("shrink")
    if shrink is None:
        return []
    lines = ["## Shrinking", ""]
    if shrink.get("file"):
        lines += [f"Smallest graph that keeps the failure: `{shrink['file']}` "
                  f"(rerun: `REPRO_GRAPH={shrink['file']} ./run.sh`).", ""]
    else:
        lines += ["No smaller graph kept the failure.", ""]
    lines += [f"Stopped: {shrink.get('stopped')}. Tried:", ""]
    lines += [f"{i}. {s['change']}: {s['result']}" for i, s in enumerate(shrink.get("steps") or [], 1)]
    return lines + [""]


def render(meta: Mapping[str, Any], row: Mapping[str, Any], facts: Mapping[str, Any],
           mismatches: Sequence[Mapping[str, Any]]) -> str:
    graph = facts["graph_file"]
    checked = ("its bytes hash to the run's graph_id " + str(row.get("graph_id")) if facts.get("verified")
               else "not checked against a graph_id (the run recorded none)")
    command = " ".join(shlex.quote(a) for a in ["hipdnn-trace", "run", graph, *facts["flags"]])
    lines = [f"# {facts['title']}", "", *_what_failed(row, mismatches), "",
             f"- graph: `{graph}` (read from `{facts['read_from']}`; {checked})",
             f"- backend `{row.get('backend')}`, engine `{row.get('engine') or '-'}`, dtype `{row.get('dtype')}`",
             f"- seed {meta.get('seed')}, validation {meta.get('validation')}",
             f"- the run's command line: `{' '.join(shlex.quote(str(a)) for a in meta.get('argv') or [])}`",
             f"- versions: {_versions(meta)}",
             f"- GPU: {meta.get('gpu') or 'none (CPU)'}; machine: {meta.get('machine')}", "",
             "## Rerun", "",
             f"    ./run.sh; echo $?      # {facts['exit_code']}, as the run did for this row", "",
             "which runs, in this folder, with the variables below exported:", "",
             f"    {command} --out runs", "",
             "## Environment", "", *_environment(meta), "", *_script(facts), *_shrink(facts)]
    return "\n".join(lines).rstrip() + "\n"

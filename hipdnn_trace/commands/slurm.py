"""``hipdnn-trace slurm``: a suite over a Slurm job array, merged by a job that waits for it.

Writes two batch scripts under ``DIR/slurm/``: an array of N tasks, task K running
``hipdnn-trace run SUITE --shard auto`` into ``DIR/shards/shard-K`` (a requeued or
re-submitted task resumes its folder), and a merge job that combines
``DIR/shards`` into ``DIR/merged`` once every task has ended
(``--dependency=afterany``: a shard that recorded errors exits non-zero but its
results belong in the merge). ``--submit`` submits both; without it the two sbatch
commands are printed. Every path and argument in the scripts is shell-quoted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.commands.argtypes import array_tasks, plain_text, positive_int
from hipdnn_trace.console import escape
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import glob_matches

EXAMPLES = """\
examples:
  hipdnn-trace slurm suites/convs/ --array 16 --gpus-per-task 1 --time 04:00:00 \\
      --out /shared/runs/convs -- --backend hipdnn -w 20 -i 200 --graph-timeout 300
                  # writes /shared/runs/convs/slurm/{shards,merge}.sbatch and prints the sbatch commands
  hipdnn-trace slurm suite.tar.gz --array 8 --partition gpu --account proj42 --submit -- --backend cudnn
                  # submits the array and the merge job (it waits for the array: afterany)
  hipdnn-trace slurm graphs/ --array 4 --sbatch-arg=--qos=debug --sbatch-arg=--cpus-per-task=4 --submit
  hipdnn-trace slurm graphs/ --array 4 --hipdnn-trace "/opt/venv/bin/python -m hipdnn_trace" --submit

Array task K (--array=0-(N-1)) runs shard K+1 of N (run --shard auto maps the task id) into
DIR/shards/shard-K, logs in DIR/logs/; the merge job writes DIR/merged. Options after -- go to
every 'hipdnn-trace run' as given (--shard, --out, --run-id and --resume are the script's own).
Graph paths and DIR are made absolute: every node must see them at the same path.
"""

#: run options the array script sets itself.
_SCRIPT_OWNS = ("--shard", "--out", "-o", "--run-id", "--resume", "--db")   # --db: the merge job imports


@dataclass(frozen=True)
class Scripts:
    """The two batch scripts' paths, where the shards and the merged run go, and the folders this
    command created (removed again when nothing could be submitted, so the same command can be retried)."""

    array: Path
    merge: Path
    shards: Path
    merged: Path
    created: tuple[Path, ...] = ()


def _split_run_options(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` keep everything after the first ``--`` as ``run_options``, unparsed.

    argparse would give those strings to the SUITE positional, or refuse them once
    it has been filled; they are the options of another command.
    """
    class _RunOptionsAfterDashes(type(parser)):   # type: ignore[misc]
        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            given = list(sys.argv[1:] if args is None else args)
            rest: list[str] = []
            if "--" in given:
                at = given.index("--")
                given, rest = given[:at], given[at + 1:]
            ns, extras = super().parse_known_args(given, namespace)
            ns.run_options = rest
            return ns, extras

    parser.__class__ = _RunOptionsAfterDashes


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "slurm", help=SUMMARIES["slurm"],
        description="Write (and with --submit submit) an sbatch script for a job array over a suite, one "
                    "shard per task, and a merge job that runs once every task has ended.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
        usage="hipdnn-trace slurm SUITE... --array N [options] [-- run options...]",
    )
    _split_run_options(p)
    p.add_argument("suite", nargs="+", metavar="SUITE", help="graph files, folders, globs or tarballs (as for run)")
    p.add_argument("--array", type=array_tasks, required=True, metavar="N",
                   help="number of array tasks = shards (#SBATCH --array=0-(N-1))")
    p.add_argument("--out", "-o", type=Path, default=None, metavar="DIR",
                   help="sweep folder (new or empty): slurm/ scripts, logs/, shards/, merged/ "
                        "(default runs/slurm-<time>-<random>)")
    s = p.add_argument_group("sbatch options (both jobs, unless said)")
    s.add_argument("--gpus-per-task", type=positive_int, default=None, metavar="G",
                   help="GPUs for each array task (#SBATCH --gpus-per-task; not the merge job)")
    s.add_argument("--partition", "-p", type=plain_text, default=None, metavar="P", help="#SBATCH --partition")
    s.add_argument("--time", "-t", type=plain_text, default=None, metavar="T",
                   help="time limit of each array task and of the merge job (#SBATCH --time, e.g. 04:00:00)")
    s.add_argument("--account", "-A", type=plain_text, default=None, metavar="A", help="#SBATCH --account")
    s.add_argument("--job-name", type=plain_text, default="hipdnn-trace", metavar="NAME",
                   help="job names: NAME-shards and NAME-merge (default hipdnn-trace)")
    s.add_argument("--sbatch-arg", type=plain_text, action="append", default=[], metavar="ARG",
                   help="one more #SBATCH line for both jobs, e.g. --sbatch-arg=--qos=debug (repeatable)")
    p.add_argument("--hipdnn-trace", dest="command_line", type=plain_text, default="hipdnn-trace", metavar="CMD",
                   help="the command the jobs run, split like a shell would (default hipdnn-trace; e.g. "
                        "'/opt/venv/bin/python -m hipdnn_trace')")
    p.add_argument("--db", type=plain_text, default=None, metavar="FILE|URL",
                   help="the merge job imports the merged run into this results store (DuckDB file on a shared "
                        "file system, or a postgresql:// URL; docs/history.md)")
    p.add_argument("--submit", action="store_true",
                   help="submit both jobs with sbatch (default: write the scripts and print the commands)")
    p.set_defaults(main=main, run_options=[])


def _check_run_options(suite: list[str], options: list[str]) -> None:
    """Refuse options the script sets itself and options 'hipdnn-trace run' does not take, now."""
    for token in options:
        name = token.split("=", 1)[0]
        if name in _SCRIPT_OWNS or (token.startswith("-o") and not token.startswith("--")):
            raise UserError(f"run option {token!r} after --: the scripts set --shard, --out, --run-id, --resume "
                            f"and --db themselves (use --out DIR and --db of slurm)")
    from hipdnn_trace.commands import run

    probe = argparse.ArgumentParser(prog="hipdnn-trace", add_help=False)
    parser = run_parser(probe, run)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args([*suite, *options])
    except SystemExit as exc:
        if exc.code:
            lines = [ln for ln in captured.getvalue().splitlines() if ln.strip()]
            why = lines[-1].split("error: ", 1)[-1] if lines else "not accepted"
            raise UserError(f"run options after --: {why}") from None


def run_parser(probe: argparse.ArgumentParser, run_module: Any) -> argparse.ArgumentParser:
    """The 'run' subcommand's parser, built on its own (for checking options, nothing runs)."""
    class _Refuse(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            self.exit(2, f"{self.prog}: error: {message}\n")

    sub = probe.add_subparsers(dest="command", parser_class=_Refuse)
    run_module.add_parser(sub)
    return sub.choices["run"]


def _absolute_suite(suite: list[str]) -> list[str]:
    """Graph arguments as absolute paths (jobs may start elsewhere); a typo fails here, not on the nodes."""
    out = []
    for arg in suite:
        if any(c in arg for c in "*?[") and not os.path.exists(arg):
            if not glob_matches(arg):   # the same matching as run's, ** included
                raise UserError(f"{arg}: matches nothing")
        elif not os.path.exists(arg):
            raise UserError(f"{arg}: no such file or folder")
        out.append(os.path.abspath(arg))
    return out


def _directive(option: str) -> str:
    return f"#SBATCH {shlex.quote(option)}"


def _log(path: Path) -> str:
    """A --output value: %% keeps a literal % of the path out of Slurm's filename patterns."""
    return str(path).replace("%", "%%")


def _common(args: argparse.Namespace) -> list[str]:
    lines = []
    for flag, value in (("--partition", args.partition), ("--time", args.time), ("--account", args.account)):
        if value is not None:
            lines.append(_directive(f"{flag}={value}"))
    lines.extend(_directive(arg) for arg in args.sbatch_arg)
    return lines


def array_script(args: argparse.Namespace, suite: list[str], folder: Path, command: list[str]) -> str:
    """The job array: task K runs shard K+1 of N into shards/shard-K, resuming it when it exists."""
    n = args.array
    shards = folder / "shards"
    run = shlex.join([*command, "run", *suite, "--shard", "auto"])
    options = shlex.join(args.run_options)
    lines = [
        "#!/bin/bash",
        f"# Written by hipdnn-trace slurm. Array task K runs shard K+1 of {n} of the suite",
        "# (--shard auto reads SLURM_ARRAY_TASK_ID/COUNT/MIN/MAX/STEP) into shards/shard-K; a requeued",
        f"# or re-submitted task resumes that folder. Keep --array at 0-{n - 1}: another range changes",
        "# the slicing (finish a single shard by hand with --shard I/N --resume).",
        _directive(f"--job-name={args.job_name}-shards"),
        _directive(f"--array=0-{n - 1}"),
        _directive("--ntasks=1"),
    ]
    if args.gpus_per_task is not None:
        lines.append(_directive(f"--gpus-per-task={args.gpus_per_task}"))
    lines += _common(args)
    lines += [
        _directive(f"--output={_log(folder / 'logs')}/shard-%a.out"),
        _directive("--signal=B:TERM@120"),   # before the time limit: files close cleanly, exit 143
        "set -euo pipefail",
        f"shards={shlex.quote(str(shards))}",
        'task="shard-${SLURM_ARRAY_TASK_ID:?not a Slurm array task}"',
        'if [[ -f "$shards/$task/run.json" ]]; then',
        f'  exec {run} --resume "$shards/$task" {options}'.rstrip(),
        "fi",
        f'exec {run} --out "$shards" --run-id "$task" {options}'.rstrip(),
        "",
    ]
    return "\n".join(lines)


def merge_script(args: argparse.Namespace, folder: Path, command: list[str]) -> str:
    """The merge job: every run directory in shards/ -> merged/."""
    merge = shlex.join([*command, "merge", str(folder / "shards"), "--out", str(folder / "merged")])
    lines = [
        "#!/bin/bash",
        "# Written by hipdnn-trace slurm: combines the array's shards once every task has ended",
        "# (submit with --dependency=afterany:ARRAY_JOB_ID).",
        _directive(f"--job-name={args.job_name}-merge"),
        _directive("--ntasks=1"),
        *_common(args),
        _directive(f"--output={_log(folder / 'logs')}/merge.out"),
        "set -euo pipefail",
        *([merge, "exec " + shlex.join([*command, "db", "import", str(folder / "merged"), "--db", args.db])]
          if getattr(args, "db", None) else [f"exec {merge}"]),
        "",
    ]
    return "\n".join(lines)


def _no_control_characters(what: str, values: list[str]) -> None:
    """Refuse a control character in a value the scripts will hold: a newline would end its line (an
    #SBATCH option's rest becomes another directive or a shell command)."""
    for value in values:
        try:
            plain_text(value)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{what}: {exc}") from None


def write_scripts(args: argparse.Namespace) -> Scripts:
    """Check the arguments, then write both scripts under DIR/slurm (DIR new or empty)."""
    try:
        command = shlex.split(args.command_line)
    except ValueError as exc:   # "No closing quotation", "No escaped character"
        raise UserError(f"--hipdnn-trace {args.command_line!r}: cannot split it like a shell ({exc})") from None
    if not command:
        raise UserError("--hipdnn-trace: empty command")
    _no_control_characters("SUITE", list(args.suite))
    _no_control_characters("run options after --", list(args.run_options))
    if args.out is not None:
        _no_control_characters("--out", [str(args.out)])
    _check_run_options(args.suite, args.run_options)
    suite = _absolute_suite(args.suite)
    if args.out is None:
        from hipdnn_trace.results.metadata import new_run_id

        args.out = Path("runs") / f"slurm-{new_run_id()}"
    folder = args.out.absolute()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{args.out} already exists and is not an empty folder; choose another --out")
    created = _new_folders(folder)
    scripts = Scripts(folder / "slurm" / "shards.sbatch", folder / "slurm" / "merge.sbatch",
                      folder / "shards", folder / "merged", created)
    try:
        for sub in ("slurm", "logs", "shards"):
            (folder / sub).mkdir(parents=True, exist_ok=True)   # Slurm does not create log folders
        scripts.array.write_text(array_script(args, suite, folder, command))
        scripts.merge.write_text(merge_script(args, folder, command))
        for path in (scripts.array, scripts.merge):
            path.chmod(0o755)
    except OSError as exc:   # a path through a regular file, a read-only or full file system
        _remove(created)
        raise UserError(f"--out {args.out}: cannot write the scripts ({exc.strerror or exc}"
                        f"{': ' + str(exc.filename) if exc.filename else ''})") from None
    return scripts


def _new_folders(folder: Path) -> tuple[Path, ...]:
    """What writing the scripts will create: the outermost missing folder on the way to ``folder``,
    or, for an existing empty ``folder``, its three sub-folders."""
    if folder.exists():
        return tuple(folder / sub for sub in ("slurm", "logs", "shards"))
    top = folder
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    return (top,)


def _remove(created: tuple[Path, ...]) -> None:
    """Undo :func:`write_scripts` after a submission that submitted nothing: only folders it created."""
    for path in created:
        shutil.rmtree(path, ignore_errors=True)


def _sbatch_path() -> str:
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise UserError("--submit: sbatch is not on PATH; run without --submit and submit the scripts "
                        "where Slurm is")
    return sbatch


def _sbatch(*arguments: str) -> str:
    """Submit; the job id (``sbatch --parsable`` prints ``ID`` or ``ID;CLUSTER``)."""
    proc = subprocess.run([_sbatch_path(), "--parsable", *arguments], capture_output=True, text=True, check=False)
    job = proc.stdout.strip().split(";", 1)[0]
    if proc.returncode or not job.isdigit():
        why = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [f"exit {proc.returncode}"])
        raise UserError(f"sbatch {arguments[-1]}: {why[-1]}")
    return job


def main(args: argparse.Namespace) -> int:
    if args.submit:
        _sbatch_path()   # no sbatch: one line before anything is written
    scripts = write_scripts(args)
    array, merge = shlex.quote(str(scripts.array)), shlex.quote(str(scripts.merge))
    if not args.submit:
        print(f"wrote {escape(scripts.array)} ({args.array} array tasks) and {escape(scripts.merge)}; submit with:")
        print(f"  job=$(sbatch --parsable {array})")
        print(f"  sbatch --dependency=afterany:${{job%%;*}} {merge}")
        print(f"merged run: {escape(scripts.merged)}")
        return 0
    try:
        job = _sbatch(str(scripts.array))
    except UserError as exc:   # nothing submitted: leave nothing behind, so the same command can be retried
        _remove(scripts.created)
        raise UserError(f"{exc}; nothing was submitted and the scripts were removed again (the same "
                        "command can be retried)") from None
    try:
        merge_job = _sbatch(f"--dependency=afterany:{job}", str(scripts.merge))
    except UserError as exc:
        raise UserError(f"{exc} (array job {job} is submitted; submit the merge with: sbatch "
                        f"--dependency=afterany:{job} {merge})") from None
    print(f"submitted array job {job} ({args.array} tasks) and merge job {merge_job} (after it); "
          f"merged run: {escape(scripts.merged)}")
    return 0

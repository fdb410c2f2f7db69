"""``hipdnn-trace slurm``: the scripts it writes run the shards and the merge (checked by running
them with bash as Slurm would, and on a real one-node Slurm cluster started from Debian's
slurm-wlm), and the merged run equals an unsharded run of the same suite."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_helpers import REPO, assert_same_results

from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.results.rundir import load_run

#: eight small bundled graphs (about 0.2 s of reference work in all)
SUITE = [REPO / "graphs" / p for p in (
    "pointwise/gelu_fp32.json", "pointwise/swish_fp32.json", "norm/layernorm_fp32.json",
    "norm/rmsnorm_fp32.json", "pointwise/leaky_relu_fp32.json", "pointwise/relu_clip_fp32.json",
    "norm/rmsnorm_backward_fp32.json", "pointwise/bias_add_broadcast_nhwc_fp32.json")]
RUN_OPTIONS = ["-w", "1", "-i", "2", "--progress", "off"]
#: the command the jobs run: this interpreter and this checkout
COMMAND = f"{shlex.quote(sys.executable)} -m hipdnn_trace"


def job_env(**extra: str) -> dict[str, str]:
    """The environment sbatch passes on: this checkout first, nothing of a Slurm job around the tests."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "HIPDNN_TRACE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def slurm_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hipdnn_trace", "slurm", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def unsharded(tmp_path: Path) -> Path:
    assert cli_main(["run", *map(str, SUITE), *RUN_OPTIONS, "-q", "--out", str(tmp_path), "--run-id", "whole"]) == 0
    return tmp_path / "whole"


def assert_equals_unsharded(merged: Path, whole: Path) -> None:
    assert load_run(merged).meta["status"] == "complete"
    assert load_run(merged).meta["graphs"] == load_run(whole).meta["graphs"]
    assert not load_run(merged).meta.get("warnings")
    assert_same_results(whole, merged)


# -- the scripts, without a scheduler -------------------------------------------------------------

def test_help_lists_examples(capsys):
    assert cli_main(["slurm", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--array N" in out and "--submit" in out and "-- run options" in out and "examples:" in out


def test_scripts_quote_paths_and_carry_the_directives(tmp_path):
    out = tmp_path / "it's 50% done"
    result = slurm_cli(*map(str, SUITE[:2]), "--array", "3", "--out", str(out), "--gpus-per-task", "2",
                       "--partition", "gpu", "--time", "01:00:00", "--account", "proj 42",
                       "--sbatch-arg=--qos=debug", "--hipdnn-trace", COMMAND, "--", "--seed", "7", "--iters", "5",
                       env=job_env())
    assert result.returncode == 0, result.stderr
    array, merge = out / "slurm" / "shards.sbatch", out / "slurm" / "merge.sbatch"
    assert f"job=$(sbatch --parsable {shlex.quote(str(array))})" in result.stdout
    assert f"sbatch --dependency=afterany:${{job%%;*}} {shlex.quote(str(merge))}" in result.stdout
    text = array.read_text()
    directives = [ln.split(" ", 1)[1] for ln in text.splitlines() if ln.startswith("#SBATCH ")]
    assert [shlex.split(d)[0] for d in directives] == [
        "--job-name=hipdnn-trace-shards", "--array=0-2", "--ntasks=1", "--gpus-per-task=2", "--partition=gpu",
        "--time=01:00:00", "--account=proj 42", "--qos=debug",
        f"--output={str(out).replace('%', '%%')}/logs/shard-%a.out", "--signal=B:TERM@120"]
    merge_directives = [shlex.split(ln.split(" ", 1)[1])[0] for ln in merge.read_text().splitlines()
                        if ln.startswith("#SBATCH ")]
    assert "--gpus-per-task=2" not in merge_directives and "--account=proj 42" in merge_directives
    for script in (array, merge):
        assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert (out / "logs").is_dir() and (out / "shards").is_dir()


def _run_script(script: Path, task: int | None, count: int, cwd: Path) -> subprocess.CompletedProcess:
    extra = {} if task is None else {
        "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count), "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": str(count - 1), "SLURM_ARRAY_TASK_STEP": "1"}
    return subprocess.run(["bash", str(script)], env=job_env(**extra), cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_scripts_run_by_bash_as_slurm_would_give_the_unsharded_run(tmp_path):
    """The array script with each task's variables (as Slurm sets them), then the merge script."""
    out = tmp_path / "a sweep"
    assert slurm_cli(*map(str, SUITE), "--array", "3", "--out", str(out), "--hipdnn-trace", COMMAND, "--",
                     *RUN_OPTIONS, env=job_env()).returncode == 0
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    for task in range(3):
        done = _run_script(out / "slurm" / "shards.sbatch", task, 3, elsewhere)
        assert done.returncode == 0, done.stderr
        assert load_run(out / "shards" / f"shard-{task}").meta["shard"]["index"] == task + 1
    again = _run_script(out / "slurm" / "shards.sbatch", 1, 3, elsewhere)   # requeued: resumes, adds nothing
    assert again.returncode == 0, again.stderr
    assert len(load_run(out / "shards" / "shard-1").meta["resumed"]) == 1
    merged = _run_script(out / "slurm" / "merge.sbatch", None, 0, elsewhere)
    assert merged.returncode == 0, merged.stderr
    assert_equals_unsharded(out / "merged", unsharded(tmp_path))


def test_the_merge_job_imports_the_merged_run_into_the_store_when_asked(tmp_path):
    out, db = tmp_path / "sweep", tmp_path / "perf.duckdb"
    assert slurm_cli(*map(str, SUITE), "--array", "2", "--out", str(out), "--hipdnn-trace", COMMAND, "--db", str(db),
                     "--", *RUN_OPTIONS, env=job_env()).returncode == 0
    assert "db import" in (out / "slurm" / "merge.sbatch").read_text()
    assert "--db" not in (out / "slurm" / "shards.sbatch").read_text()   # shards are partial runs
    for task in range(2):
        assert _run_script(out / "slurm" / "shards.sbatch", task, 2, tmp_path).returncode == 0
    merged = _run_script(out / "slurm" / "merge.sbatch", None, 0, tmp_path)
    assert merged.returncode == 0, merged.stderr
    from hipdnn_trace.history.store import Store

    store = Store(str(db), create=False)
    assert store.sql("SELECT run_id FROM runs") == [("merged",)]
    assert store.sql("SELECT count(DISTINCT graph_id) FROM results")[0][0] == len(SUITE)


def test_array_script_outside_an_array_task_says_so(tmp_path):
    out = tmp_path / "s"
    assert slurm_cli(str(SUITE[0]), "--array", "2", "--out", str(out), "--hipdnn-trace", COMMAND,
                     env=job_env()).returncode == 0
    done = _run_script(out / "slurm" / "shards.sbatch", None, 0, tmp_path)
    assert done.returncode != 0 and "SLURM_ARRAY_TASK_ID: not a Slurm array task" in done.stderr


@pytest.mark.parametrize("args, problem", [
    (["--", "--out", "x"], "run option '--out' after --: the scripts set --shard, --out, --run-id, --resume and --db"),
    (["--", "--shard=1/2"], "run option '--shard=1/2' after --"),
    (["--", "-ox"], "run option '-ox' after --"),
    (["--", "--itres", "3"], "run options after --: unrecognized arguments: --itres 3"),
    (["--", "--backend", "nope"], "run options after --: argument --backend/-b: invalid choice: 'nope'"),
    (["--array", "0"], "argument --array: must be >= 1, got 0"),
    (["--hipdnn-trace", ""], "--hipdnn-trace: empty command"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, args, problem):
    argv = ["slurm", str(SUITE[0]), "--out", str(tmp_path / "s"), *args]
    if "--array" not in args:
        argv[2:2] = ["--array", "2"]
    assert cli_main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and problem in err, err
    assert not (tmp_path / "s").exists()


def test_missing_graphs_and_a_used_folder_are_refused(tmp_path, capsys):
    assert cli_main(["slurm", str(tmp_path / "nothere.json"), "--array", "2", "--out", str(tmp_path / "s")]) == 1
    assert "nothere.json: no such file or folder" in capsys.readouterr().err
    assert cli_main(["slurm", str(tmp_path / "*.json"), "--array", "2", "--out", str(tmp_path / "s")]) == 1
    assert "*.json: matches nothing" in capsys.readouterr().err
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    assert cli_main(["slurm", str(SUITE[0]), "--array", "2", "--out", str(tmp_path / "used")]) == 1
    assert "used already exists and is not an empty folder" in capsys.readouterr().err


def test_a_recursive_glob_matches_as_it_does_for_run(tmp_path):
    from hipdnn_trace.commands.slurm import _absolute_suite

    deep = tmp_path / "suite" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "g.json").write_text(SUITE[0].read_text())
    pattern = str(tmp_path / "suite" / "**" / "*.json")
    assert _absolute_suite([pattern]) == [pattern]   # glob.glob without recursive=True matched nothing here


def test_submit_without_sbatch_on_path_is_a_one_line_error(tmp_path):
    result = slurm_cli(str(SUITE[0]), "--array", "2", "--out", str(tmp_path / "s"), "--submit",
                       env=job_env(PATH=str(tmp_path)))
    assert result.returncode == 1
    assert result.stderr.strip() == ("hipdnn-trace slurm: error: --submit: sbatch is not on PATH; run without "
                                     "--submit and submit the scripts where Slurm is")
    assert not (tmp_path / "s").exists()   # refused before anything was written: the same command can be retried


def _fake_sbatch(folder: Path, body: str) -> dict[str, str]:
    """An environment whose only sbatch is a shell script running ``body`` (the arguments in "$*")."""
    folder.mkdir(exist_ok=True)
    script = folder / "sbatch"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return job_env(PATH=str(folder))


REFUSE = 'echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1'


@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_submission_leaves_nothing_and_the_same_command_then_works(tmp_path, existing):
    out = tmp_path / "sweeps" / "s"
    if existing:
        out.mkdir(parents=True)   # an empty folder given as --out stays, empty
    args = (str(SUITE[0]), "--array", "2", "--out", str(out), "--submit")
    result = slurm_cli(*args, env=_fake_sbatch(tmp_path / "bin", REFUSE))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"hipdnn-trace slurm: error: sbatch {out / 'slurm' / 'shards.sbatch'}: sbatch: error: Batch job submission "
        "failed: Invalid partition name specified; nothing was submitted and the scripts were removed again "
        "(the same command can be retried)")
    if existing:
        assert out.is_dir() and not any(out.iterdir())
    else:
        assert not (tmp_path / "sweeps").exists()   # the folders this command created, parents included
    accept = 'case "$*" in *dependency*) echo 8;; *) echo 7;; esac'
    result = slurm_cli(*args, env=_fake_sbatch(tmp_path / "bin", accept))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("submitted array job 7 (2 tasks) and merge job 8 (after it)")
    assert (out / "slurm" / "shards.sbatch").is_file()


def test_a_failed_merge_submission_keeps_the_folder_the_running_array_uses(tmp_path):
    out = tmp_path / "s"
    env = _fake_sbatch(tmp_path / "bin", 'case "$*" in *dependency*) echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" '
                                         '>&2; exit 1;; *) echo 7;; esac')
    result = slurm_cli(str(SUITE[0]), "--array", "2", "--out", str(out), "--submit", env=env)
    assert result.returncode == 1
    assert "(array job 7 is submitted; submit the merge with: sbatch --dependency=afterany:7 " in result.stderr
    assert (out / "slurm" / "merge.sbatch").is_file() and (out / "shards").is_dir()


# -- a real Slurm ---------------------------------------------------------------------------------

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(pid_files: list[Path]) -> None:
    """Stop the daemons of these pid files (and only them): TERM, then KILL what is left after 10 s."""
    pids = []
    for pid_file in pid_files:
        try:
            pids.append(int(pid_file.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:
            _wait_for(lambda: not any(_alive(pid) for pid in pids), 10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return f"(no {path.name})"


SLURM_CONF = """\
ClusterName=hdtest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture
def slurm_cluster(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A one-node Slurm (munged, slurmctld, slurmd on localhost) for this test; the job environment."""
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing; Debian: apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm of this test runs its daemons as root")
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("munge", "state", "spool"):
        (root / sub).mkdir(mode=0o700)
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(root=root, ctld_port=_free_port(), slurmd_port=_free_port(),
                                      cpus=os.cpu_count() or 1))
    env = job_env(SLURM_CONF=str(conf), PATH=os.environ.get("PATH", "") + ":/usr/sbin")
    started: list[Path] = []

    def start(name: str, argv: list[str], pid_file: Path, log: Path) -> None:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            pytest.skip(f"{name} could not start: {(done.stderr.strip() or _tail(log)).splitlines()[-1:]}")
        started.append(pid_file)

    try:
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))   # what mungekey --create writes: random bytes, owner-only
        key.chmod(0o600)
        start("munged", ["munged", "--force", f"--key-file={key}", f"--socket={root}/munge/socket",
                         f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/munge/munged.log",
                         f"--seed-file={root}/munge/seed"],
              root / "munge" / "munged.pid", root / "munge" / "munged.log")
        start("slurmctld", ["slurmctld", "-i", "-f", str(conf)], root / "slurmctld.pid", root / "slurmctld.log")
        start("slurmd", ["slurmd", "-f", str(conf), "-N", "localhost"], root / "slurmd.pid", root / "slurmd.log")

        def idle() -> bool:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, check=False)
            return state.stdout.strip() == "idle"

        if not _wait_for(idle, 30):
            pytest.skip(f"the Slurm node did not come up within 30 s: {_tail(root / 'slurmctld.log')} / "
                        f"{_tail(root / 'slurmd.log')}")
        yield env
    finally:
        if started:
            subprocess.run(["scancel", "--full", "--user", "root"], env=env, capture_output=True, check=False)
            _wait_for(lambda: not subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True,
                                                 check=False).stdout.strip(), 10)
        _stop([p for p in started if "munge" not in p.name])   # slurmd and slurmctld, then munged
        _stop([p for p in started if "munge" in p.name])


@pytest.mark.slow
def test_an_array_of_four_on_a_real_slurm_merges_to_the_unsharded_run(slurm_cluster, tmp_path):
    out = tmp_path / "sweep"
    submitted = slurm_cli(*map(str, SUITE), "--array", "4", "--out", str(out), "--time", "00:05:00",
                          "--hipdnn-trace", COMMAND, "--submit", "--", *RUN_OPTIONS, env=slurm_cluster)
    assert submitted.returncode == 0, submitted.stderr
    assert "submitted array job" in submitted.stdout and "(4 tasks)" in submitted.stdout

    def merged() -> bool:
        run_json = out / "merged" / "run.json"
        return run_json.exists() and json.loads(run_json.read_text()).get("status") != "running"

    if not _wait_for(merged, 180):
        queue = subprocess.run(["squeue"], env=slurm_cluster, capture_output=True, text=True, check=False).stdout
        logs = {p.name: _tail(p, 5) for p in sorted((out / "logs").glob("*.out"))}
        pytest.fail(f"no merged run after 180 s; squeue: {queue!r}; logs: {logs}")
    shards = sorted(p.name for p in (out / "shards").iterdir())
    assert shards == ["shard-0", "shard-1", "shard-2", "shard-3"]
    recorded = [load_run(out / "shards" / s).meta for s in shards]
    assert [m["shard"]["index"] for m in recorded] == [1, 2, 3, 4]
    assert all(m["shard_from"]["SLURM_ARRAY_TASK_COUNT"] == "4" for m in recorded)
    assert sorted(len(m["graphs"]) for m in recorded) == [2, 2, 2, 2]
    assert_equals_unsharded(out / "merged", unsharded(tmp_path))

"""The `sbatch` command for one attempt of a task, and the commands that stop it (pure).

Our engine has already chosen the nodes; Slurm is told exactly those (`--nodelist`, `--nodes`) and
the GPUs per node (`--gres=gpu:N`), so it places nothing itself. It only picks *which* GPUs of a node
(CUDA_VISIBLE_DEVICES is Slurm's). One attempt is one job: GPU Commons requeues a preempted task by
submitting its next attempt, so Slurm must never requeue on its own (`--no-requeue`).

Layout of a job:
- one node: the batch script `exec`s the command, which then *is* the batch step. Stop it with
  `scancel --signal=TERM --full ID` (plain `--signal` skips the batch step).
- several nodes (a gang over whole nodes): the batch script `exec`s `srun` with one task per node, and
  each node's task sees its own GPUs. Stop it with `scancel --signal=TERM ID`, which signals the step's
  tasks only: srun itself must not receive SIGTERM, because srun answers it by SIGKILLing every task
  ("forcing job termination"), which would leave no time to checkpoint.
Then, after the class's grace period, `scancel ID`.

The end mark. Slurm learns of a job's end at once, but GPU Commons would only learn of it at its next
`squeue` round; on a cluster of short tasks that delay is lost on every GPU at every turn. So the
batch script runs the command (or srun) in the foreground, not with `exec`, and when it returns writes
the exit status to `slurm-<job id>.end` in `end_mark_dir` (beside the output, on the file system the
nodes share): the server reads it within tens of milliseconds (`end_marks`, which also says how a
forged mark is caught). For the shell to outlive a stop signal (`--full` signals it along with the
task) it traps the signals a class may stop with; a handler, unlike an ignored signal, is not
inherited, so the task receives the signal as before. A task killed by a signal ends its batch shell
with the same signal, so Slurm records `0:<signal>` as it did when the command was the batch step.
A submission with Slurm's own time limit keeps `exec`: its warning (`--signal=B:…`) reaches the batch
shell only, which must then be the task.

The task's environment is written into the batch script (shell-quoted), not passed with `--export`,
whose comma-separated list cannot carry a comma in a value. sbatch gets `--export=ALL` and is run with
an environment of only `sbatch_environment` (the few variables a task may inherit, and SLURM_CONF), so
the server's secrets never reach a task. Not `--export=<list>`: with a list (or NONE) Slurm loads the
user's login environment on the node (`--get-user-env`, a login shell per job), which costs seconds
per job when the controller is busy.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from gpucommons.backends.slurm.hostlist import compress

#: Variables of the submitter's environment a task inherits (besides Slurm's own SLURM_*).
PASSTHROUGH = ("PATH", "LANG", "LANGUAGE", "TZ")
JOB_NAME_PREFIX = "gpucommons"
_JOB_NAME = re.compile(rf"^{JOB_NAME_PREFIX}:(?P<task>[^:\s]+):(?P<attempt>\d+)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The signals a priority class may stop a task with, which the batch shell must outlive.
STOP_SIGNALS = "HUP INT QUIT TERM USR1 USR2"


class SubmitError(ValueError):
    """A submission that cannot be expressed to sbatch; the message says which field and why."""


class RunAsVia(StrEnum):
    """How sbatch is made to submit as the team's Unix user (the submitter must be root)."""

    #: `sbatch --uid=USER --gid=GROUP` (Slurm's own option).
    UID_OPTION = "uid-option"
    #: `runuser -u USER -g GROUP -- sbatch ...`, for a Slurm whose sbatch has no --uid.
    RUNUSER = "runuser"


@dataclass(frozen=True, slots=True)
class RunAs:
    user: str
    group: str | None = None
    via: RunAsVia = RunAsVia.UID_OPTION


@dataclass(frozen=True, slots=True)
class SlurmSubmission:
    """One attempt of a task, placed by our engine on `nodes` with `gpus_per_node` GPUs on each."""

    task_id: str
    team: str
    #: COMMONS_RESTART_COUNT: 0 for the first attempt.
    attempt: int
    command: tuple[str, ...]
    nodes: tuple[str, ...]
    gpus_per_node: int
    #: The task's working directory; it must exist on every node (a shared file system).
    workdir: Path
    checkpoint_dir: Path
    #: The attempt's output (stdout and stderr) goes to OUTPUT_DIR/<task>-<attempt>.out.
    output_dir: Path
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    run_as: RunAs | None = None
    cpus_per_node: int | None = None
    memory_mb_per_node: int | None = None
    #: Slurm's own time limit; None = the partition's. Set it to the class's max runtime plus grace.
    time_limit_s: int | None = None
    #: The signal that asks the task to stop (the priority class's), for Slurm's warning before its
    #: own time limit: `SIGTERM`, `TERM` or a number.
    stop_signal: str = "SIGTERM"
    #: Seconds between that warning and the time limit (the class's grace period).
    grace_period_s: int = 30
    #: Extra environment (the server's launch variables); COMMONS_* below win over it.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The task's PATH; None = the submitter's PATH (exported by name).
    path: str | None = None
    #: The attempt's output file, appended to (every attempt of a task in one log); None: a file of
    #: its own per attempt, OUTPUT_DIR/<task>-<attempt>.out.
    output: Path | None = None
    #: Where the batch script leaves `slurm-<job id>.end` when the command has returned (module
    #: docstring); None: no mark, the command is exec'd.
    end_mark_dir: Path | None = None

    @property
    def multi_node(self) -> bool:
        return len(self.nodes) > 1

    @property
    def end_mark_folder(self) -> Path | None:
        """Where the batch script leaves its end mark; None when it leaves none (no folder, or
        Slurm's own time limit, whose warning needs the command exec'd: module docstring)."""
        return self.end_mark_dir if self.time_limit_s is None else None


@dataclass(frozen=True, slots=True)
class SbatchCommand:
    """Run `argv` with `script` on its standard input; sbatch prints the job id (`--parsable`)."""

    argv: tuple[str, ...]
    script: str
    output_path: Path
    job_name: str


def job_name(task_id: str, attempt: int) -> str:
    """`gpucommons:t0a1b2c3d4:2`: how GPU Commons finds its own jobs in squeue and sacct."""
    return f"{JOB_NAME_PREFIX}:{task_id}:{attempt}"


def parse_job_name(name: str) -> tuple[str, int] | None:
    """(task id, attempt) of a job GPU Commons submitted; None for any other job."""
    match = _JOB_NAME.match(name.strip())
    if match is None:
        return None
    return match["task"], int(match["attempt"])


def end_mark_path(folder: Path, job_id: str) -> Path:
    """The file holding the exit status that job `job_id`'s batch script leaves in `folder`."""
    return folder / f"slurm-{job_id}.end"


def output_path(submission: SlurmSubmission) -> Path:
    if submission.output is not None:
        return submission.output
    return submission.output_dir / f"{submission.task_id}-{submission.attempt}.out"


def sbatch_environment(base: Mapping[str, str], path: str | None = None) -> dict[str, str]:
    """What sbatch runs with (and, through `--export=ALL`, what the job starts from): the variables
    of `PASSTHROUGH` and LC_*, and Slurm's own (SLURM_CONF, SLURM_TIME_FORMAT); nothing else of the
    server's environment. `path` replaces the server's PATH."""
    env = {k: v for k, v in base.items() if k in PASSTHROUGH or k.startswith("LC_")}
    env.update({k: base[k] for k in ("SLURM_CONF", "SLURM_TIME_FORMAT") if k in base})
    if path is not None:
        env["PATH"] = path
    return env


def build_sbatch(submission: SlurmSubmission) -> SbatchCommand:
    """The sbatch command line and batch script for `submission` (raises SubmitError when it cannot)."""
    _check(submission)
    s = submission
    out = output_path(s)
    name = job_name(s.task_id, s.attempt)
    argv: list[str] = [
        "sbatch",
        "--parsable",
        f"--job-name={name}",
        f"--nodes={len(s.nodes)}",
        f"--nodelist={compress(s.nodes)}",
        "--ntasks-per-node=1",
        f"--chdir={s.workdir}",
        # stdout and stderr in one file per attempt; `%` is Slurm's pattern character.
        f"--output={_escape_pattern(out)}",
        "--no-requeue",
        # Not a list: see the module docstring (sbatch runs with `sbatch_environment` only).
        "--export=ALL",
    ]
    if s.output is not None:
        argv.append("--open-mode=append")
    if s.gpus_per_node:
        argv.append(f"--gres=gpu:{s.gpus_per_node}")
    if s.cpus_per_node:
        argv.append(f"--cpus-per-task={s.cpus_per_node}")
    if s.memory_mb_per_node:
        argv.append(f"--mem={s.memory_mb_per_node}M")
    if s.partition:
        argv.append(f"--partition={s.partition}")
    if s.account:
        argv.append(f"--account={s.account}")
    if s.qos:
        argv.append(f"--qos={s.qos}")
    if s.time_limit_s is not None:
        argv.append(f"--time={_minutes(s.time_limit_s)}")
        # Slurm's own time limit then warns the task like a preemption does; single-node: the batch
        # step is the task (B:), several nodes: the srun step's tasks (default scope).
        scope = "" if s.multi_node else "B:"
        argv.append(f"--signal={scope}{signal_name(s.stop_signal)}@{max(1, s.grace_period_s)}")
    if s.run_as is not None and s.run_as.via is RunAsVia.UID_OPTION:
        argv.append(f"--uid={s.run_as.user}")
        if s.run_as.group:
            argv.append(f"--gid={s.run_as.group}")
    if s.run_as is not None and s.run_as.via is RunAsVia.RUNUSER:
        prefix = ["runuser", "-u", s.run_as.user]
        if s.run_as.group:
            prefix += ["-g", s.run_as.group]
        argv = [*prefix, "--", *argv]
    return SbatchCommand(argv=tuple(argv), script=batch_script(s), output_path=out, job_name=name)


def task_environment(submission: SlurmSubmission) -> dict[str, str]:
    """What the batch script exports (Slurm adds CUDA_VISIBLE_DEVICES and SLURM_* itself)."""
    s = submission
    env = {"PYTHONUNBUFFERED": "1", **s.env}
    if s.path is not None:
        env["PATH"] = s.path
    env.update(
        {
            "COMMONS_TASK_ID": s.task_id,
            "COMMONS_TEAM": s.team,
            "COMMONS_CHECKPOINT_DIR": str(s.checkpoint_dir),
            "COMMONS_RESTART_COUNT": str(s.attempt),
        }
    )
    # Slurm sets it per node from the GPUs it gives; a value from the launch would lie.
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def batch_script(submission: SlurmSubmission) -> str:
    s = submission
    lines = [
        "#!/bin/sh",
        f"# GPU Commons: task {s.task_id} of team {s.team}, attempt {s.attempt}",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(task_environment(s).items())]
    # --export leaves USER and HOME out; a task expects them (caches, config files).
    lines += [
        'USER="$(id -un)"; LOGNAME="$USER"; export USER LOGNAME',
        'home="$(getent passwd "$(id -u)" | cut -d: -f6)"; [ -n "$home" ] && export HOME="$home"',
    ]
    command = shlex.join(s.command)
    if s.multi_node:
        step = [
            "srun",
            # The batch script's environment, with the exports above (sbatch's --export list would
            # otherwise be applied to the step again and drop them).
            "--export=ALL",
            f"--nodes={len(s.nodes)}",
            "--ntasks-per-node=1",
            # A gang: one node's task failing ends the others.
            "--kill-on-bad-exit=1",
        ]
        if s.gpus_per_node:
            step.append(f"--gres=gpu:{s.gpus_per_node}")
        if s.cpus_per_node:
            step.append(f"--cpus-per-task={s.cpus_per_node}")
        run = f"{shlex.join(step)} -- {command}"
    else:
        run = command
    folder = s.end_mark_folder
    if folder is None:
        lines.append(f"exec {run}")
        return "\n".join(lines) + "\n"
    mark = shlex.quote(str(folder)) + '/slurm-"$SLURM_JOB_ID".end'
    lines += [
        # The shell outlives a stop signal to leave the end mark; the task still receives it.
        f"trap : {STOP_SIGNALS}",
        run,
        "code=$?",
        # Written whole, then renamed: the server never reads half a mark.
        f'echo "$code" > {mark}.tmp && mv -f {mark}.tmp {mark}',
        f"trap - {STOP_SIGNALS}",
        # Ended by signal N (status 128+N, N ≤ 15): end the same way, so Slurm records the signal.
        'if [ "$code" -gt 128 ] && [ "$code" -le 143 ]; then ulimit -c 0; kill -$((code - 128)) $$; fi',
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def signal_name(signal: str) -> str:
    """`SIGTERM` → `TERM`; `TERM` and `15` unchanged (what scancel and --signal take)."""
    value = signal.strip().upper()
    return value.removeprefix("SIG") if not value.isdigit() else value


def signal_command(job_id: str, signal: str, *, multi_node: bool) -> tuple[str, ...]:
    """Ask the attempt to stop: the batch step (one node) or the srun step's tasks (several nodes)."""
    _check_job_id(job_id)
    if multi_node:
        return ("scancel", f"--signal={signal_name(signal)}", job_id)
    return ("scancel", f"--signal={signal_name(signal)}", "--full", job_id)


def cancel_command(job_id: str) -> tuple[str, ...]:
    """End the attempt after its grace period (Slurm sends SIGTERM, then SIGKILL after KillWait)."""
    _check_job_id(job_id)
    return ("scancel", job_id)


def parse_sbatch_output(stdout: str) -> str:
    """`--parsable` prints `123` or `123;cluster`: the job id."""
    text = stdout.strip().splitlines()[-1].strip() if stdout.strip() else ""
    job_id = text.split(";", 1)[0]
    if not job_id.isdigit():
        raise SubmitError(f"sbatch printed {stdout.strip()!r}, not a job id")
    return job_id


def _check(s: SlurmSubmission) -> None:
    problems = []
    if not s.command:
        problems.append("the command is empty")
    if not s.nodes:
        problems.append("no node was given (the engine places the task before it is submitted)")
    if len(set(s.nodes)) != len(s.nodes):
        problems.append(f"a node is named twice in {list(s.nodes)}")
    if s.gpus_per_node < 0:
        problems.append(f"gpus_per_node is {s.gpus_per_node}")
    if s.attempt < 0:
        problems.append(f"attempt is {s.attempt}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", s.task_id):
        problems.append(f"task id {s.task_id!r} has characters a job name cannot carry")
    for key in s.env:
        if not _ENV_NAME.match(key):
            problems.append(f"environment variable name {key!r} is not a shell name")
    folders = [("workdir", s.workdir), ("output_dir", s.output_dir)]
    if s.end_mark_dir is not None:
        folders.append(("end_mark_dir", s.end_mark_dir))
    for label, path in folders:
        if "\n" in str(path) or "\\" in str(path):
            problems.append(f"{label} {str(path)!r} holds a newline or a backslash, which sbatch cannot take")
    if s.time_limit_s is not None and s.time_limit_s <= 0:
        problems.append(f"time_limit_s is {s.time_limit_s}")
    if problems:
        raise SubmitError(f"task {s.task_id}: " + "; ".join(problems))


def _check_job_id(job_id: str) -> None:
    # Only digits (and a `_N` array index): never an option or a filter that could cancel other jobs.
    if not re.fullmatch(r"\d+(_\d+)?", job_id):
        raise SubmitError(f"{job_id!r} is not a Slurm job id")


def _escape_pattern(path: Path) -> str:
    return str(path).replace("%", "%%")


def _minutes(seconds: int) -> str:
    """Slurm's `--time` in minutes, rounded up (`--time=0` would mean no limit)."""
    return str(max(1, -(-seconds // 60)))

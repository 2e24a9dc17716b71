"""`SlurmClient`: the one place that runs Slurm's commands (the rest of the package is pure).

Every command runs with the cluster's `SLURM_CONF` (when given) and `SLURM_TIME_FORMAT=%s` (times as
seconds since the epoch, whatever the controller's time zone), under a timeout. A failure becomes a
`SlurmError` whose message says what to check: a command that is not installed, a controller that does
not answer, or the first line Slurm printed on stderr.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpucommons.backends.slurm.jobs import (
    SACCT_FIELDS,
    WATCH_FIELDS,
    SlurmJob,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue,
    squeue_format,
)
from gpucommons.backends.slurm.nodes import (
    SINFO_GRES_USED,
    SlurmNode,
    parse_gres_used,
    parse_nodes,
    with_gpus_in_use,
)
from gpucommons.backends.slurm.submit import (
    SlurmSubmission,
    build_sbatch,
    cancel_command,
    parse_sbatch_output,
    sbatch_environment,
    signal_command,
)

#: What scancel and scontrol say about a job the controller no longer knows, or one that has ended:
#: stopping such a job is not an error (it has stopped).
_GONE = ("Invalid job id specified", "already completing or completed", "Job has already finished")
_PACKAGES = {
    "sbatch": "slurm-client",
    "squeue": "slurm-client",
    "scontrol": "slurm-client",
    "scancel": "slurm-client",
    "sacct": "slurm-client",
    "sacctmgr": "slurm-client",
    "sinfo": "slurm-client",
    "runuser": "util-linux",
}


class SlurmError(RuntimeError):
    """A Slurm command failed; `str()` is one sentence naming the command and what went wrong."""

    def __init__(
        self, message: str, argv: Sequence[str] = (), returncode: int | None = None, stderr: str = ""
    ):
        super().__init__(message)
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class SubmittedJob:
    job_id: str
    job_name: str
    output_path: Path


class SlurmClient:
    """Runs Slurm's client commands against one cluster."""

    def __init__(
        self,
        slurm_conf: Path | None = None,
        *,
        timeout_s: float = 30.0,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        """`slurm_conf` None: the commands find the configuration as they would in a shell
        ($SLURM_CONF of `base_env`, else Slurm's default). `base_env` defaults to this process's."""
        env = dict(os.environ if base_env is None else base_env)
        self._conf = slurm_conf
        if slurm_conf is not None:
            env["SLURM_CONF"] = str(slurm_conf)
        env["SLURM_TIME_FORMAT"] = "%s"
        self.env = env
        self.timeout_s = timeout_s

    @property
    def slurm_conf(self) -> str:
        return self.env.get("SLURM_CONF", "Slurm's default configuration")

    # --- running ---------------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Run one command (with `env`, else the client's environment); its output, or SlurmError."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if self._conf is not None and not self._conf.is_file():
            raise SlurmError(
                f"the Slurm configuration {self._conf} does not exist (--slurm-conf, $SLURM_CONF)", argv
            )
        try:
            done = subprocess.run(
                list(argv),
                input=input,
                capture_output=True,
                text=True,
                env=dict(self.env if env is None else env),
                timeout=timeout,
            )
        except FileNotFoundError:
            package = _PACKAGES.get(argv[0], "slurm-client")
            raise SlurmError(
                f"{argv[0]} is not installed on this machine (Debian: apt-get install {package})", argv
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmError(
                f"{' '.join(argv[:2])} did not answer within {timeout:g} s: is slurmctld running and "
                f"reachable with SLURM_CONF={self.slurm_conf}?",
                argv,
            ) from None
        if done.returncode != 0:
            first = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "")
            raise SlurmError(
                f"{' '.join(argv[:2])} failed (exit {done.returncode}): {first or 'no message'}",
                argv,
                done.returncode,
                done.stderr,
            )
        return done.stdout

    # --- reading ---------------------------------------------------------------------------------

    def nodes(self) -> tuple[SlurmNode, ...]:
        """Every node, with the GPUs in use from sinfo (scontrol's AllocTRES counts GPUs only where
        slurm.conf has AccountingStorageTRES=gres/gpu)."""
        nodes = parse_nodes(self.run(["scontrol", "show", "nodes", "--oneliner"]))
        used = parse_gres_used(self.run(["sinfo", "--Node", "--noheader", f"--Format={SINFO_GRES_USED}"]))
        return with_gpus_in_use(nodes, used)

    def jobs(self) -> tuple[SlurmJob, ...]:
        """Every job slurmctld remembers (running, pending, and ended within MinJobAge)."""
        return parse_scontrol_jobs(self.run(["scontrol", "show", "job", "--oneliner"]))

    def job(self, job_id: str) -> SlurmJob | None:
        """One job, None once slurmctld has forgotten it (read `accounting()` then)."""
        try:
            found = parse_scontrol_jobs(self.run(["scontrol", "show", "job", "--oneliner", job_id]))
        except SlurmError as error:
            if any(word in error.stderr for word in _GONE):
                return None
            raise
        return found[0] if found else None

    def queue(self, *, partition: str | None = None) -> tuple[SlurmJob, ...]:
        """Pending and running jobs of every user (squeue)."""
        argv = ["squeue", "--noheader", "--all", f"--Format={squeue_format()}"]
        if partition:
            argv.append(f"--partition={partition}")
        return parse_squeue(self.run(argv))

    def watch(self) -> tuple[SlurmJob, ...]:
        """Every job the controller remembers, ended ones included, in one cheap call (squeue
        `--states=all`, `WATCH_FIELDS`); exit codes only for COMPLETED jobs (ask `job()` for others)."""
        argv = ["squeue", "--noheader", "--all", "--states=all", f"--Format={squeue_format(WATCH_FIELDS)}"]
        return parse_squeue(self.run(argv), WATCH_FIELDS)

    def accounting(self, job_ids: Sequence[str]) -> tuple[SlurmJob, ...]:
        """The jobs as slurmdbd recorded them (needs accounting; rows lag the controller by a second
        or two)."""
        if not job_ids:
            return ()
        argv = [
            "sacct",
            "--parsable2",
            "--allusers",
            f"--format={','.join(SACCT_FIELDS)}",
            f"--jobs={','.join(job_ids)}",
        ]
        return parse_sacct(self.run(argv))

    # --- acting ----------------------------------------------------------------------------------

    def submit(self, submission: SlurmSubmission) -> SubmittedJob:
        command = build_sbatch(submission)
        env = sbatch_environment(self.env, submission.path)
        job_id = parse_sbatch_output(self.run(command.argv, input=command.script, env=env))
        return SubmittedJob(job_id, command.job_name, command.output_path)

    def signal(self, job_id: str, signal: str, *, multi_node: bool) -> bool:
        """Send the stop signal; False when the job had already ended (nothing to signal)."""
        return self._stop(signal_command(job_id, signal, multi_node=multi_node))

    def cancel(self, job_id: str) -> bool:
        """Cancel the job; False when it had already ended."""
        return self._stop(cancel_command(job_id))

    def _stop(self, argv: Sequence[str]) -> bool:
        try:
            self.run(argv)
        except SlurmError as error:
            if any(word in error.stderr for word in _GONE):
                return False
            raise
        return True

    def sacctmgr(self, *args: str, immediate: bool = True) -> str:
        """`sacctmgr [-i] ARGS`; `immediate` commits without sacctmgr's interactive question."""
        return self.run(["sacctmgr", *(["-i"] if immediate else []), *args])

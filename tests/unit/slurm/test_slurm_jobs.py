"""Jobs out of scontrol, squeue and sacct (recorded on the test cluster): states, GPUs, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucommons.backends.slurm.jobs import (
    JobParseError,
    JobPhase,
    SlurmExit,
    SlurmJob,
    job_phase,
    parse_exit,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue,
    parse_time,
)

DATA = Path(__file__).parents[2] / "data" / "slurm"


def by_id(jobs: tuple[SlurmJob, ...]) -> dict[str, SlurmJob]:
    return {j.job_id: j for j in jobs}


def test_scontrol_gives_running_attempts_with_their_nodes_and_gpus() -> None:
    jobs = by_id(parse_scontrol_jobs((DATA / "jobs_running_pending.txt").read_text()))
    single, gang = jobs["1"], jobs["2"]
    assert (single.name, single.phase, single.nodes, single.gpus) == (
        "gpucommons:t0000000001:0",
        JobPhase.RUNNING,
        ("n1",),
        4,
    )
    assert (gang.nodes, gang.gpus, gang.account, gang.user) == (("n2", "n3"), 16, "nlp", "root")
    assert gang.start_time is not None and gang.start_time >= gang.submit_time  # type: ignore[operator]
    assert gang.stdout is not None and gang.stdout.endswith("t0000000002-0.out")
    assert gang.end_time is None and gang.exit == SlurmExit(0, 0)


def test_scontrol_gives_pending_jobs_with_their_reason_and_no_start() -> None:
    jobs = by_id(parse_scontrol_jobs((DATA / "jobs_running_pending.txt").read_text()))
    waits, as_nobody = jobs["4"], jobs["5"]
    assert (waits.phase, waits.reason, waits.gpus, waits.nodes, waits.start_time) == (
        JobPhase.PENDING,
        "Resources",
        32,
        (),
        None,
    )
    assert (as_nobody.user, as_nobody.account, as_nobody.reason) == ("nobody", "nlp", "Priority")


def test_scontrol_gives_the_exit_code_or_the_signal_of_an_ended_job() -> None:
    jobs = by_id(parse_scontrol_jobs((DATA / "jobs_ended.txt").read_text()))
    assert (jobs["3"].phase, jobs["3"].exit) == (JobPhase.ENDED, SlurmExit(7, 0))
    assert jobs["5"].exit == SlurmExit(0, 15) and not jobs["5"].exit.succeeded
    assert jobs["1"].state == "CANCELLED" and jobs["1"].end_time is not None


def test_a_job_lost_with_its_node_is_recognised() -> None:
    (gang,) = parse_scontrol_jobs((DATA / "jobs_node_failure.txt").read_text())
    assert (gang.state, gang.phase, gang.lost_to_the_machine, gang.restarts) == (
        "NODE_FAIL",
        JobPhase.ENDED,
        True,
        0,
    )


def test_squeue_gives_pending_and_running_jobs() -> None:
    jobs = by_id(parse_squeue((DATA / "squeue.txt").read_text()))
    assert set(jobs) == {"1", "2", "4", "5"}
    assert (jobs["2"].nodes, jobs["2"].gpus, jobs["2"].name) == (("n2", "n3"), 16, "gpucommons:t0000000002:0")
    assert (jobs["4"].phase, jobs["4"].start_time, jobs["4"].reason) == (JobPhase.PENDING, None, "Resources")
    assert jobs["5"].user == "nobody"


def test_squeue_keeps_a_job_name_holding_the_separator_whole() -> None:
    line = (
        "9|RUNNING|None|nlp|alice|gpu|n1|cpu=1,gres/gpu=2|gres:gpu:2|N/A|N/A|1|1|1796140772|1796140773|"
        + "a|b|c|"
    )
    (job,) = parse_squeue(line)
    assert (job.name, job.gpus) == ("a|b|c", 2)


# Without slurmdbd, slurm.conf cannot count GPUs as a TRES (slurmctld refuses
# AccountingStorageTRES=gres/gpu): these lines, from the test cluster without accounting, count none.
NO_GPU_TRES_SQUEUE = (
    "1|RUNNING|None|(null)|root|gpu|n[1-2]|cpu=2,mem=200M,node=2,billing=2|gres:gpu:3|N/A|N/A|2|2|1796141300|1796141301|wrap|\n"
    "2|PENDING|Priority|(null)|root|gpu||cpu=1,mem=100M,node=1,billing=1|N/A|gres:gpu:3|N/A|1|1|1796141300|N/A|wrap|\n"
)
NO_GPU_TRES_SCONTROL = (
    "JobId=1 JobName=wrap JobState=RUNNING NodeList=n[1-2] NumNodes=2 NumCPUs=2 NumTasks=2 "
    "TRES=cpu=2,mem=200M,node=2,billing=2 TresPerNode=gres:gpu:3\n"
    "JobId=3 JobName=wrap JobState=PENDING NodeList=(null) NumNodes=1-2 NumTasks=4 "
    "TRES=cpu=4,mem=400M,node=1,billing=4 TresPerTask=gres:gpu:1\n"
)


def test_without_gpus_in_the_tres_a_jobs_gpus_come_from_its_request() -> None:
    squeue = by_id(parse_squeue(NO_GPU_TRES_SQUEUE))
    assert (squeue["1"].gpus, squeue["2"].gpus) == (6, 3)
    scontrol = by_id(parse_scontrol_jobs(NO_GPU_TRES_SCONTROL))
    assert (scontrol["1"].gpus, scontrol["3"].gpus) == (6, 4)


def test_sacct_folds_steps_into_their_job_and_reads_a_cancelled_jobs_signal_from_its_batch_step() -> None:
    jobs = by_id(parse_sacct((DATA / "sacct.txt").read_text()))
    assert set(jobs) == {"1", "2", "3", "4", "5"}
    assert jobs["3"].exit == SlurmExit(7, 0)
    assert jobs["5"].exit == SlurmExit(0, 15)
    # The gang's own line says 0:0; its batch step (srun) ended with 15.
    assert jobs["2"].exit == SlurmExit(15, 0) and jobs["2"].lost_to_the_machine
    assert jobs["1"].state == "CANCELLED by 0" and jobs["1"].phase is JobPhase.ENDED
    assert (jobs["4"].nodes, jobs["4"].gpus, jobs["4"].start_time) == ((), 0, 1796141220)


def test_sacct_output_without_the_needed_columns_is_refused() -> None:
    with pytest.raises(JobParseError, match="lacks the columns ExitCode"):
        parse_sacct("JobID|State\n1|COMPLETED\n")


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("PENDING", JobPhase.PENDING),
        ("REQUEUED", JobPhase.PENDING),
        ("RUNNING", JobPhase.RUNNING),
        ("COMPLETING", JobPhase.RUNNING),
        ("COMPLETED", JobPhase.ENDED),
        ("CANCELLED by 1000", JobPhase.ENDED),
        ("OUT_OF_MEMORY", JobPhase.ENDED),
        ("SOMETHING_NEW", JobPhase.UNKNOWN),
    ],
)
def test_job_phases(state: str, phase: JobPhase) -> None:
    assert job_phase(state) is phase


def test_exit_codes_and_times_parse_or_say_what_is_wrong() -> None:
    assert parse_exit("0:15") == SlurmExit(0, 15)
    assert parse_exit("") is None
    with pytest.raises(JobParseError):
        parse_exit("x:1")
    assert parse_time("1796140772") == 1796140772
    assert parse_time("2026-12-01T15:50:56") == parse_time("2026-12-01T15:50:56+00:00")
    assert parse_time("Unknown") is None and parse_time("N/A") is None
    with pytest.raises(JobParseError, match="neither"):
        parse_time("yesterday")

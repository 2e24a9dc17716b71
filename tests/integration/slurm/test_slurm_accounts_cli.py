"""`commons slurm render|apply` against a real slurmdbd (MariaDB): accounts per team with their groups'
users, QOS that hold plain sbatch jobs to the team's quota, a plan printed before anything is written,
and a second apply that finds nothing to do.

Tests share one accounting database; each uses its own parent account and prefixes, so none sees
another's objects (and `--prune` only ever touches what is under its parent).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucommons.testing.slurm_cluster import SlurmCluster, wait_until

runner = CliRunner(env={"COLUMNS": "200"})
pytestmark = pytest.mark.timeout(180)

POLICY = """
cluster:
  name: demo
  pools: [{name: gpu, gpu_type: H100, nodes: 4, gpus_per_node: 8}]
cohorts: [{name: research}]
teams:
  - {name: nlp, groups: [ml-nlp], cohort: research, quota: {gpu: {gpus: 4}}}
  - {name: vision, groups: [ml-vision], quota: {gpu: {gpus: 8}}}
"""


def commons(*args: str) -> tuple[int, str, str]:
    from gpucommons.cli.main import app

    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    policy = tmp_path / "commons.yaml"
    policy.write_text(POLICY)
    members = tmp_path / "members.yaml"
    members.write_text("ml-nlp: [nobody, alice]\nml-vision: [bob]\n")
    return policy, members


def site(slurm: SlurmCluster, tag: str) -> list[str]:
    """Options that keep this test's objects apart from the others'."""
    return [
        "--slurm-conf",
        str(slurm.conf),
        "--parent-account",
        f"gc-{tag}",
        "--account-prefix",
        f"{tag}-",
        "--qos-prefix",
        f"{tag}-q-",
        "--governed-qos",
        f"{tag}-governed",
        "--runner-prefix",
        f"{tag}-run-",
    ]


def associations(slurm: SlurmCluster, parent: str) -> set[tuple[str, str, str]]:
    """(account, user, QOS) of every association under `parent` (its accounts' own rows have no user)."""
    out = slurm.run(
        "sacctmgr", "--noheader", "--parsable2", "show", "association", "format=Account,ParentName,User,QOS"
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    ours = {a for a, p, u, _ in rows if p == parent and not u}
    return {(a, u, q) for a, p, u, q in rows if a in ours or a == parent}


def test_dry_run_prints_the_plan_and_writes_nothing(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path]
) -> None:
    policy, members = files
    code, out, err = commons(
        "slurm",
        "apply",
        "-p",
        str(policy),
        "--members",
        str(members),
        "--dry-run",
        *site(slurm_accounting, "dry"),
    )
    assert code == 0, err
    assert "account  dry-nlp" in out and "would be created" in out and "member of ml-nlp" in out
    assert "plan against the accounting database: 8 to create, 0 to update, 0 unchanged" in out
    assert "dry run: nothing was written" in out
    assert associations(slurm_accounting, "gc-dry") == set()


def test_apply_creates_accounts_and_users_and_a_second_apply_finds_nothing_to_do(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path]
) -> None:
    policy, members = files
    args = ("slurm", "apply", "-p", str(policy), "--members", str(members), *site(slurm_accounting, "ap"))
    code, out, err = commons(*args)
    assert code == 0, err
    assert "applied with sacctmgr: 8 changes" in out
    assert {(a, u) for a, u, _ in associations(slurm_accounting, "gc-ap")} == {
        ("gc-ap", ""),
        ("ap-nlp", ""),
        ("ap-vision", ""),
        ("ap-nlp", "nobody"),
        ("ap-nlp", "alice"),
        ("ap-nlp", "ap-run-nlp"),
        ("ap-vision", "bob"),
        ("ap-vision", "ap-run-vision"),
    }
    code, out, err = commons(*args)
    assert code == 0, err
    assert "nothing to change: the accounting database already matches the policy" in out


def test_prune_removes_a_user_who_left_the_group_and_a_team_that_left_the_policy(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path]
) -> None:
    policy, members = files
    options = site(slurm_accounting, "pr")
    assert commons("slurm", "apply", "-p", str(policy), "--members", str(members), *options)[0] == 0
    members.write_text("ml-nlp: [nobody]\n")
    policy.write_text(POLICY.split("  - {name: vision")[0])
    code, out, err = commons(
        "slurm", "apply", "-p", str(policy), "--members", str(members), "--prune", *options
    )
    assert code == 0, err
    assert "would be removed" in out and "no longer in the team's groups" in out
    assert {(a, u) for a, u, _ in associations(slurm_accounting, "gc-pr")} == {
        ("gc-pr", ""),
        ("pr-nlp", ""),
        ("pr-nlp", "nobody"),
        ("pr-nlp", "pr-run-nlp"),
    }


def test_with_qos_plain_sbatch_jobs_stay_within_the_teams_quota(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path]
) -> None:
    slurm = slurm_accounting
    policy, members = files
    code, _, err = commons(
        "slurm", "apply", "-p", str(policy), "--members", str(members), "--qos", *site(slurm, "qs")
    )
    assert code == 0, err
    assert ("qs-nlp", "nobody", "qs-q-nlp") in associations(slurm, "gc-qs")
    # The account GPU Commons submits as may use only the unlimited QOS.
    assert ("qs-nlp", "qs-run-nlp", "qs-governed") in associations(slurm, "gc-qs")
    work = slurm.root / "qos-test"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    sbatch = [
        "sbatch",
        "--parsable",
        "--uid=nobody",
        "--account=qs-nlp",
        "--gres=gpu:3",
        f"--chdir={work}",
        "--output=/dev/null",
        "--wrap",
        "sleep 30",
    ]
    first = slurm.run(*sbatch).stdout.strip()
    second = slurm.run(*sbatch).stdout.strip()

    def state(job: str) -> str:
        return slurm.run("squeue", "--noheader", "--format=%T %r", f"--jobs={job}").stdout.strip()

    wait_until("the first job to run", lambda: state(first).startswith("RUNNING"), 30)
    time.sleep(1)
    # 3 + 3 GPUs would exceed nlp's nominal 4: the second waits on the QOS, with free GPUs around it.
    assert state(second) == "PENDING QOSGrpGRES"


def test_rendered_commands_run_on_a_fresh_database_and_agree_with_apply(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path], tmp_path: Path
) -> None:
    slurm = slurm_accounting
    policy, members = files
    options = site(slurm, "rn")[2:]  # render takes no --slurm-conf
    code, script, err = commons(
        "slurm", "render", "-p", str(policy), "--members", str(members), "--qos", *options
    )
    assert code == 0, err
    (tmp_path / "accounts.sh").write_text(script)
    done = subprocess.run(
        ["sh", "-e", str(tmp_path / "accounts.sh")], env=slurm.env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    code, out, err = commons(
        "slurm", "apply", "-p", str(policy), "--members", str(members), "--qos", *site(slurm, "rn")
    )
    assert code == 0, err
    assert "nothing to change" in out


def test_a_rendered_load_file_loads_and_agrees_with_apply(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path], tmp_path: Path
) -> None:
    slurm = slurm_accounting
    policy, members = files
    load = tmp_path / "accounts.cfg"
    code, _, err = commons(
        "slurm",
        "render",
        "-p",
        str(policy),
        "--members",
        str(members),
        "--format",
        "load",
        "--cluster",
        slurm.name,
        "--out",
        str(load),
        *site(slurm, "ld")[2:],
    )
    assert code == 0, err
    slurm.run("sacctmgr", "-i", "load", str(load))
    code, out, err = commons(
        "slurm", "apply", "-p", str(policy), "--members", str(members), *site(slurm, "ld")
    )
    assert code == 0, err
    assert "nothing to change" in out


def test_bad_inputs_are_one_message_each(
    slurm_accounting: SlurmCluster, files: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, members = files
    members.write_text("ml-nlp: [alice, 'bad user']\n")
    code, _, err = commons("slurm", "render", "-p", str(policy), "--members", str(members))
    assert code == 1 and "ml-nlp: 'bad user' is not a Unix user name; nothing rendered" in err
    code, _, err = commons("slurm", "render", "-p", str(policy), "--members", str(tmp_path / "none.yaml"))
    assert code == 1 and "cannot read the members file" in err
    code, _, err = commons("slurm", "render", "-p", str(policy), "--format", "load")
    assert code == 1 and "give --cluster" in err
    code, _, err = commons("slurm", "apply", "-p", str(policy), "--slurm-conf", str(tmp_path / "no.conf"))
    assert code == 1 and "cannot read the accounting database" in err and "nothing was applied" in err

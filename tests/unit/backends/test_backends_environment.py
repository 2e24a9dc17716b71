"""The environment a task gets is built from the launch, not from the server's secrets."""

from __future__ import annotations

from pathlib import Path

from gpucommons.backends.local.environment import cuda_visible_devices, task_environment
from gpucommons.backends.ports import Launch

BASE = {"PATH": "/opt/bin:/usr/bin", "LC_ALL": "C.UTF-8", "HOME": "/root", "COMMONS_TOKEN": "secret"}


def launch(**kw: object) -> Launch:
    fields: dict[str, object] = {
        "task_id": "t7",
        "team": "cv",
        "command": ("train",),
        "env": {"COMMONS_RESTART_COUNT": "2"},
        "workdir": Path("/ws/cv"),
        "log_path": Path("/logs/t7.log"),
        "gpu_indices": (1, 3),
    }
    fields.update(kw)
    return Launch(**fields)  # type: ignore[arg-type]


def test_task_gets_launch_variables_locale_and_path_but_not_server_secrets() -> None:
    env = task_environment(launch(), BASE)
    assert env == {
        "PATH": "/opt/bin:/usr/bin",
        "LC_ALL": "C.UTF-8",
        "HOME": "/root",
        "PYTHONUNBUFFERED": "1",
        "COMMONS_RESTART_COUNT": "2",
        "COMMONS_TASK_ID": "t7",
        "COMMONS_TEAM": "cv",
        "CUDA_VISIBLE_DEVICES": "1,3",
    }


def test_assigned_gpus_override_a_conflicting_variable_and_none_hides_all() -> None:
    assert task_environment(launch(env={"CUDA_VISIBLE_DEVICES": "0"}), BASE)["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert task_environment(launch(gpu_indices=()), BASE)["CUDA_VISIBLE_DEVICES"] == ""
    assert cuda_visible_devices((0, 1, 2)) == "0,1,2"


def test_task_run_as_a_team_account_gets_its_name_and_workspace_home() -> None:
    env = task_environment(launch(run_as="commons-cv"), BASE, home="/ws/cv")
    assert (env["USER"], env["LOGNAME"], env["HOME"]) == ("commons-cv", "commons-cv", "/ws/cv")

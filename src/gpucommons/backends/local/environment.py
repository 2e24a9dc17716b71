"""The environment a task's process sees: a small, predictable set, never the server's secrets.

The server's own environment may hold database URLs and tokens; a task must not inherit them. A
task gets the locale and a PATH built from the server's (`task_path`: one a team account can use;
for the server's own user, with the platform's `bin` directory, where `commons` is), the
variables the control plane set in its `Launch`
(docs/design.md, contract 6: COMMONS_TASK_ID, COMMONS_TEAM, COMMONS_CHECKPOINT_DIR, COMMONS_RESTART_COUNT),
CUDA_VISIBLE_DEVICES naming exactly the GPUs it was given, and PYTHONUNBUFFERED=1 (which the
launch may override) so that a Python task's log can be followed live.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucommons.backends.local.task_path import DEFAULT_PATH
from gpucommons.backends.ports import Launch

#: Variables of the server's environment that a task may inherit (plus every LC_*).
PASSTHROUGH = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR")


def cuda_visible_devices(gpu_indices: tuple[int, ...]) -> str:
    """`0,3` for GPUs 0 and 3; empty for a task given no GPU, which hides every GPU from CUDA."""
    return ",".join(str(i) for i in gpu_indices)


def task_environment(
    launch: Launch, base: Mapping[str, str], home: str | None = None, path: str | None = None
) -> dict[str, str]:
    """The whole environment of the task's process (pure: `base` is the server's environment).

    `path` replaces the server's PATH (the executor passes `task_path.task_path`'s).

    `gpu_indices` is authoritative for CUDA_VISIBLE_DEVICES: whatever `launch.env` says, the task
    sees the GPUs it was assigned and no other.
    """
    env = {k: v for k, v in base.items() if k in PASSTHROUGH or k.startswith("LC_")}
    if path is not None:
        env["PATH"] = path
    env.setdefault("PATH", DEFAULT_PATH)
    # Python tasks write their log lines as they happen (`commons logs -f`), not at exit.
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(launch.env)
    env.setdefault("COMMONS_TASK_ID", launch.task_id)
    env.setdefault("COMMONS_TEAM", launch.team)
    env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices(launch.gpu_indices)
    if launch.run_as is not None:
        env["USER"] = env["LOGNAME"] = launch.run_as
    if home is not None:
        env["HOME"] = home
    elif "HOME" not in env and "HOME" in base:
        env["HOME"] = base["HOME"]
    return env

"""A tiny training job for the e2e tests: counts steps, saves its state on SIGTERM, resumes from it.

Usage: python task_script.py JOURNAL STEPS [STEP_S [RESUMED_STEP_S]]. Appends one JSON line per event
to JOURNAL (under Slurm, with the node it ran on and its job id). A step takes STEP_S (0.1 s),
or RESUMED_STEP_S in an attempt after a restart, so a resumed task does not keep the test waiting.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

journal = pathlib.Path(sys.argv[1])
steps = int(sys.argv[2])
ckpt_dir = pathlib.Path(os.environ["COMMONS_CHECKPOINT_DIR"])
ckpt = ckpt_dir / "state.json"
restart = int(os.environ["COMMONS_RESTART_COUNT"])
state = json.loads(ckpt.read_text()) if ckpt.exists() else {"step": 0}


def note(event: str) -> None:
    record = {
        "task": os.environ["COMMONS_TASK_ID"],
        "event": event,
        "restart": restart,
        "step": state["step"],
        "node": os.environ.get("SLURMD_NODENAME", ""),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "job": os.environ.get("SLURM_JOB_ID", ""),
        "at": time.time(),
    }
    with journal.open("a") as f:
        f.write(json.dumps(record) + "\n")


def on_sigterm(_signum: int, _frame: object) -> None:
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    ckpt.write_text(json.dumps(state))
    note("sigterm-saved")
    subprocess.run([sys.executable, "-m", "gpucommons", "checkpoint", "--path", str(ckpt)], check=False)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
note("start")
step_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
if restart and len(sys.argv) > 4:
    step_s = float(sys.argv[4])
while state["step"] < steps:
    time.sleep(step_s)
    state["step"] += 1
note("done")

"""A stand-in for a training job that plays by GPU Commons' rules: it saves its state when it is
asked to stop, reports the checkpoint, and resumes from it when it runs again.

Standard library only, so it runs under any account with any `python3` (a team account cannot
always run the interpreter GPU Commons itself runs on). Usage, as the command of a task:

    commons submit --team nlp --gpus 8 --checkpoint on-signal -- \
        python3 -c "$(cat examples/tasks/train.py)" 600

(`-c "$(cat ...)"` hands over the script's text, so the file need not be readable by the team's
account.) The argument is the number of one-second steps. It prints one line per 10 steps.
"""

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 600
state_file = Path(os.environ["COMMONS_CHECKPOINT_DIR"]) / "state.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"step": 0}
attempt = os.environ.get("COMMONS_RESTART_COUNT", "0")
print(f"attempt {attempt}: starting at step {state['step']} of {steps}", flush=True)


def report_checkpoint() -> None:
    """POST /api/v1/tasks/{id}/checkpoint with the attempt's own token (what `commons checkpoint` does)."""
    url = f"{os.environ['COMMONS_URL']}/api/v1/tasks/{os.environ['COMMONS_TASK_ID']}/checkpoint"
    body = json.dumps({"path": str(state_file), "note": f"step {state['step']}"}).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Authorization", f"Bearer {os.environ['COMMONS_TOKEN']}")
    request.add_header("Content-Type", "application/json")
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except OSError as exc:  # the state is saved either way; the report only helps the scheduler
        print(f"could not report the checkpoint: {exc}", flush=True)


def save() -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(state_file)  # atomic: a kill mid-write leaves the previous state
    report_checkpoint()


def on_stop(signum: int, _frame: object) -> None:
    save()
    print(f"stopped by signal {signum} at step {state['step']}; state saved", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_stop)
while state["step"] < steps:
    time.sleep(1)
    state["step"] += 1
    if state["step"] % 10 == 0:
        print(f"step {state['step']}", flush=True)
save()
print("done", flush=True)

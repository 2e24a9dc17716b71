"""Hypothesis strategies for what a stored task and its attempt can hold: every column the task list
shows, each set or left empty, within what both stores keep exactly as given."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

STATES = ["pending", "admitted", "running", "preempting", "succeeded", "failed", "cancelled"]
INT32 = st.integers(-(2**31), 2**31 - 1)
#: No NUL (PostgreSQL refuses it), no lone surrogates (not UTF-8).
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
#: Times `datetime.fromtimestamp` can write, fractions of microseconds too.
TIME = st.floats(0, 4e9, allow_nan=False)


def task_columns(
    ids: st.SearchStrategy[str], seqs: st.SearchStrategy[int], teams: st.SearchStrategy[str]
) -> st.SearchStrategy[dict[str, Any]]:
    """A `TaskRow`'s columns (its attempt aside)."""
    return st.fixed_dictionaries(
        dict(
            id=ids,
            seq=seqs,
            name=TEXT,
            team=teams,
            state=st.sampled_from(STATES),
            priority_class=TEXT,
            priority_value=INT32,
            command=st.lists(TEXT, max_size=3),
            gpus=INT32,
            cpu_milli=INT32,
            memory_mib=INT32,
            pool_request=st.none() | TEXT,
            checkpoint_mode=st.sampled_from(["none", "on-signal", "every", "other"]),
            checkpoint_interval_s=st.none() | INT32,
            submitted_at=TIME,
            queued_at=TIME,
            admitted_at=st.none() | TIME,
            started_at=st.none() | TIME,
            finished_at=st.none() | TIME,
            restart_count=INT32,
            preemptions=INT32,
            exit_code=st.none() | INT32,
            cancel_requested=st.booleans(),
            last_checkpoint_at=st.none() | TIME,
            # a whole number too: what a store may hand back for a float column
            lost_gpu_seconds=st.floats(allow_nan=False) | st.integers(0, 10**6),
            message=TEXT,
            submitted_by=TEXT,
            image=st.none() | TEXT,
            cluster_ref=st.none() | TEXT,
            origin=st.sampled_from(["commons", "cluster"]),
        )
    )


#: An `AttemptRow`'s columns that the task list shows (and the one it must have), or no attempt.
ATTEMPT_COLUMNS = st.none() | st.fixed_dictionaries(
    dict(admitted_at=TIME, pool=TEXT, gpu_indices=st.lists(INT32, max_size=4), borrowed_gpus=INT32)
)

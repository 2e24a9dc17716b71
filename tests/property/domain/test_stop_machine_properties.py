"""Properties of the stop machine (hypothesis): whatever the stored fields, the class's grace and
the times the supervisor happens to look, SIGKILL never comes before the deadline, always comes
once the deadline has passed, and a stop only moves forward (signal → wait → kill, again every retry
while no end is seen → give up once → wait for the exit)."""

from __future__ import annotations

import itertools
import signal

from hypothesis import given
from hypothesis import strategies as st

from gpucommons.domain.stopping import GIVE_UP_AFTER_S, KILL_RETRY_S, StopAction, StopFields, stop_step

TERM = int(signal.SIGTERM)
#: The phases a stop goes through, in order; KILL and WAIT_FOR_EXIT alternate within "killing".
PHASE = {
    StopAction.SEND_SIGNAL: 0,
    StopAction.WAIT: 1,
    StopAction.KILL: 2,
    StopAction.WAIT_FOR_EXIT: 2,
    StopAction.GIVE_UP: 3,
}
times = st.floats(min_value=0, max_value=1e6, allow_nan=False)
graces = st.floats(min_value=-10, max_value=1e4, allow_nan=False)


@st.composite
def started_stops(draw: st.DrawFn) -> StopFields:
    """A stop as the store may hold it: signalled, perhaps with a deadline, not yet killed."""
    requested = draw(times)
    deadline = draw(st.none() | st.floats(min_value=requested - 10, max_value=requested + 1e4))
    return StopFields(requested_at=requested, deadline=deadline)


def deadline_of(fields: StopFields, grace_s: float) -> float:
    assert fields.requested_at is not None
    deadline = fields.deadline if fields.deadline is not None else fields.requested_at + max(0.0, grace_s)
    return max(fields.requested_at, deadline)


#: How far from the deadline the supervisor looks: on it, a hair either side, or anywhere near.
offsets = st.sampled_from([0.0, -1e-6, 1e-6]) | st.floats(min_value=-1e4, max_value=1e4, allow_nan=False)


@given(started_stops(), graces, offsets)
def test_no_kill_before_the_deadline_and_always_one_after(
    fields: StopFields, grace: float, offset: float
) -> None:
    now = deadline_of(fields, grace) + offset
    action = stop_step(fields, now, grace_s=grace, signum=TERM).action
    if now < deadline_of(fields, grace):
        assert action is StopAction.WAIT
    else:
        assert action is StopAction.KILL


@given(graces, times, st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), max_size=12))
def test_a_stop_driven_at_any_times_only_moves_forward(grace: float, start: float, gaps: list[float]) -> None:
    fields, now, seen, kills = StopFields(), start, [], []
    for gap in [0.0, *gaps]:
        now += gap
        step = stop_step(fields, now, grace_s=grace, signum=TERM)
        gave_up = fields.gave_up_at is not None
        seen.append(4 if gave_up else PHASE[step.action])
        if step.action is StopAction.KILL:
            assert fields.deadline is not None and now >= fields.deadline
            assert not gave_up, "a SIGKILL after the stop gave up"
            kills.append(now)
        if step.action is StopAction.GIVE_UP:
            assert fields.killed_at is not None and now >= fields.killed_at + GIVE_UP_AFTER_S
        fields = fields.after(step, now)
    assert seen == sorted(seen)
    assert seen[0] == PHASE[StopAction.SEND_SIGNAL]
    assert fields.requested_at == start and fields.deadline == start + max(0.0, grace)
    if now >= start + max(0.0, grace) and len(seen) > 1:
        assert fields.killed_at is not None
    # SIGKILL is repeated no oftener than every retry, and counted.
    assert all(b - a >= KILL_RETRY_S - 1e-6 for a, b in itertools.pairwise(kills))
    assert fields.kills == len(kills)
    assert seen.count(PHASE[StopAction.GIVE_UP]) <= 1

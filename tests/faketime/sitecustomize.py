"""Loaded only by the faketime smoke run of `scripts/test.sh` (PYTHONPATH=tests/faketime).

That run fakes the wall clock (a month's first hour) but not the monotonic clock
(`FAKETIME_DONT_FAKE_MONOTONIC=1`): faking both makes every `threading.Event.wait` hang. With the
monotonic clock excluded, libfaketime 0.9.10 mangles the absolute deadline of
`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, which Python ≥ 3.11's `time.sleep` uses, and
every sleep fails with EINVAL (wolfcw/libfaketime#426). `select()` with a relative timeout sleeps
just as well and is left alone, so this process and its Python children sleep through it.
"""

from __future__ import annotations

import os
import select
import time

if os.environ.get("FAKETIME"):

    def _sleep(seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        select.select([], [], [], seconds)

    time.sleep = _sleep

"""`scontrol show ... --oneliner` lines → {key: value}.

scontrol prints `Key=value` pairs separated by spaces, and does not quote values: a job name, a node's
`Reason=Not responding [slurm@...]` or an `OS=Linux 6.1 #1 SMP` carry spaces. A word that does not
start a new `Key=` therefore continues the previous value. A key is a capitalised word that may hold
letters, digits and `/:_.` (`CPUs/Task`, `ReqB:S:C:T`, `AllocNode:Sid`); a value may hold `=`
itself (`TRES=cpu=1,gres/gpu=4`), since only the first `=` of a word separates.

The one case this cannot tell apart is a free-text value holding a word shaped like a key
(`JobName=run LR=3`); the fields we read (state, nodes, TRES, times, exit codes) never do.
"""

from __future__ import annotations

import re

_KEY = re.compile(r"^[A-Z][A-Za-z0-9/:_.]*=")


def parse_line(line: str) -> dict[str, str]:
    """One `--oneliner` record → {key: value}, values stripped; a later duplicate key wins."""
    fields: dict[str, str] = {}
    key: str | None = None
    for word in line.split(" "):
        if word and _KEY.match(word):
            key, _, value = word.partition("=")
            fields[key] = value
        elif key is not None:
            fields[key] += " " + word
    return {k: v.strip() for k, v in fields.items()}


def parse_records(text: str, first_key: str) -> list[dict[str, str]]:
    """Every record of a `--oneliner` listing whose first key is `first_key` (`NodeName`, `JobId`).

    Blank lines and lines that are not records (a "No jobs in the system" notice) are skipped.
    """
    records = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(first_key + "="):
            records.append(parse_line(stripped))
    return records


#: Values scontrol prints for "nothing here".
NULLS = frozenset({"", "(null)", "N/A", "n/a", "None", "Unknown", "none"})


def optional(value: str | None) -> str | None:
    """A value, or None when scontrol printed one of its "nothing" words."""
    if value is None or value.strip() in NULLS:
        return None
    return value.strip()

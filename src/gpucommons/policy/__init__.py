"""The policy file (`commons.yaml`, docs/design.md, contract 1): schema, loading with path-precise
errors, JSON Schema.

`load_policy(path)` / `parse_policy(text)` return a frozen `gpucommons.domain.Policy` or raise
`PolicyError`, whose `issues` (each `PolicyIssue(path, message, line)`) list every problem at once.

The re-exports are lazy (PEP 562): the pydantic schema and the YAML loader cost ~0.1 s to import, and
the `commons` CLI imports this package (for `durations`/`errors`) on every start-up, including the
`commons checkpoint` a task runs inside its preemption grace period.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucommons._lazy import lazy_exports
from gpucommons.policy.durations import format_duration, parse_duration
from gpucommons.policy.errors import PolicyError, PolicyIssue

if TYPE_CHECKING:
    from gpucommons.policy.dump import dump_policy, policy_to_data
    from gpucommons.policy.json_schema import policy_json_schema
    from gpucommons.policy.loader import load_policy, parse_policy
    from gpucommons.policy.schema import PolicyFile

#: Public name -> the submodule that defines it, imported on first access.
_LAZY = {
    "PolicyFile": "gpucommons.policy.schema",
    "dump_policy": "gpucommons.policy.dump",
    "load_policy": "gpucommons.policy.loader",
    "parse_policy": "gpucommons.policy.loader",
    "policy_json_schema": "gpucommons.policy.json_schema",
    "policy_to_data": "gpucommons.policy.dump",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "PolicyError",
    "PolicyFile",
    "PolicyIssue",
    "dump_policy",
    "format_duration",
    "load_policy",
    "parse_duration",
    "parse_policy",
    "policy_json_schema",
    "policy_to_data",
]

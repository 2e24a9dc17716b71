"""The policy file (`commons.yaml`, contract 1): schema, loading with path-precise errors, JSON Schema.

`load_policy(path)` / `parse_policy(text)` return a frozen `gpucommons.domain.Policy` or raise
`PolicyError`, whose `issues` (each `PolicyIssue(path, message, line)`) list every problem at once.
"""

from gpucommons.policy.dump import dump_policy, policy_to_data
from gpucommons.policy.durations import format_duration, parse_duration
from gpucommons.policy.errors import PolicyError, PolicyIssue
from gpucommons.policy.json_schema import policy_json_schema
from gpucommons.policy.loader import load_policy, parse_policy
from gpucommons.policy.schema import PolicyFile

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

"""The policy file (`commons.yaml`, contract 1): schema, loading with path-precise errors, JSON Schema.

policy = load_policy("commons.yaml")     # -> gpucommons.domain.Policy, or PolicyError
for issue in error.issues: issue.path, issue.line, issue.message
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

"""Reading a policy file: YAML → schema → cross-checks → `domain.Policy`, or every problem at once."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gpucommons.domain.model import Policy
from gpucommons.policy.checks import run_checks
from gpucommons.policy.convert import to_domain
from gpucommons.policy.errors import PolicyError, PolicyIssue
from gpucommons.policy.issues import schema_issues
from gpucommons.policy.salvage import Parts, salvage
from gpucommons.policy.schema import PolicyFile
from gpucommons.policy.yaml_source import format_path, read_yaml

_SECTIONS = "cluster (with its pools), priority_classes, teams, ..."


def parse_policy(text: str, source: str = "commons.yaml") -> Policy:
    """The `Policy` that `text` describes. Raises `PolicyError` listing every problem, in file order."""
    doc = read_yaml(text)
    issues = list(doc.issues)
    model: PolicyFile | None = None
    if doc.data is None:
        if not issues:
            issues.append(PolicyIssue("", f"the policy is empty: it needs at least {_SECTIONS}", 1))
    elif not isinstance(doc.data, dict):
        issues.append(
            PolicyIssue("", f"the policy must be a mapping of sections ({_SECTIONS}), not a single value", 1)
        )
    else:
        try:
            model = PolicyFile.model_validate(doc.data)
            parts = Parts.of(model)
        except ValidationError as exc:
            issues.extend(schema_issues(exc, doc))
            parts = salvage(doc.data, exc)
        for path, message in run_checks(parts):
            issues.append(PolicyIssue(format_path(path), message, doc.line_of(path)))
    if issues or model is None:
        raise PolicyError(_in_file_order(issues), source)
    return to_domain(model)


def load_policy(path: str | Path) -> Policy:
    """Read and parse a policy file. A missing or unreadable file is a `PolicyError` too."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError([PolicyIssue("", "no such file")], str(file)) from None
    except IsADirectoryError:
        raise PolicyError([PolicyIssue("", "this is a directory, not a policy file")], str(file)) from None
    except UnicodeDecodeError as exc:
        raise PolicyError(
            [PolicyIssue("", f"the file is not UTF-8 text ({exc.reason})")], str(file)
        ) from None
    except OSError as exc:
        raise PolicyError([PolicyIssue("", f"cannot read the file: {exc.strerror}")], str(file)) from None
    return parse_policy(text, source=str(file))


def _in_file_order(issues: list[PolicyIssue]) -> list[PolicyIssue]:
    """By line (issues without one last); the order found breaks ties, so output is stable."""
    unique = list(dict.fromkeys(issues))
    return sorted(unique, key=lambda issue: issue.line if issue.line is not None else 1 << 30)

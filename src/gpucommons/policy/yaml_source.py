"""Reading the YAML text: exact numbers, the line of every key, and duplicate keys.

PyYAML turns `2.50` into a binary float and silently keeps the last of two equal keys. A price must
stay exact (`Decimal("2.50")`) and a quota that names a pool twice must be refused, so we compose
the document into nodes ourselves: one walk builds the data, remembers the line of every path and
reports repeated keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from gpucommons.policy.errors import PolicyIssue

#: A path into the document: mapping keys and sequence indices.
Path = tuple[str | int, ...]


#: libyaml's parser when PyYAML has it (about 10× faster on a policy with a thousand teams).
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _ExactLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader whose floats are `Decimal`s read from the text, never rounded through binary."""


def _construct_decimal(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Decimal:
    text = str(loader.construct_scalar(node)).replace("_", "").strip().lower()
    if text in (".inf", "+.inf"):
        return Decimal("Infinity")
    if text == "-.inf":
        return Decimal("-Infinity")
    if text == ".nan":
        return Decimal("NaN")
    try:
        return Decimal(text)
    except InvalidOperation:  # YAML 1.1 sexagesimal floats (1:30.5): rare; go through float
        return Decimal(str(loader.construct_yaml_float(node)))


_ExactLoader.add_constructor("tag:yaml.org,2002:float", _construct_decimal)


_SELF_ALIAS = "a YAML alias refers to itself"


def format_path(path: Path) -> str:
    """`("teams", 1, "quota", "h100", "gpus")` → `teams[1].quota.h100.gpus`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass
class YamlDocument:
    """The data of a policy file plus where each path starts in the text."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    issues: list[PolicyIssue] = field(default_factory=list)

    def line_of(self, path: Path) -> int | None:
        """The line of `path`, or of its nearest ancestor that the text has (a missing key's parent)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None


def read_yaml(text: str) -> YamlDocument:
    """Compose `text` into data + line map. Syntax errors become issues with their line, never raise."""
    try:
        loader = _ExactLoader(text)
    except yaml.reader.ReaderError as exc:  # a control character anywhere in the text
        line = text.count("\n", 0, exc.position) + 1
        return YamlDocument(data=None, issues=[PolicyIssue("", f"YAML error: {exc.reason}", line)])
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument(data=None)
        doc = YamlDocument(data=None, lines={(): node.start_mark.line + 1})
        _walk(node, (), doc, frozenset())
        if not any(issue.message == _SELF_ALIAS for issue in doc.issues):
            doc.data = loader.construct_document(node)
        return doc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        where = None if mark is None else mark.line + 1
        return YamlDocument(data=None, issues=[PolicyIssue("", f"YAML syntax error: {what}", where)])
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        return YamlDocument(data=None, issues=[PolicyIssue("", f"YAML error: {exc.reason}", line)])
    except yaml.YAMLError as exc:
        return YamlDocument(data=None, issues=[PolicyIssue("", f"YAML error: {exc}", None)])
    finally:
        loader.dispose()


def _walk(node: yaml.Node, path: Path, doc: YamlDocument, open_nodes: frozenset[int]) -> None:
    if id(node) in open_nodes:  # a recursive alias (`&a [*a]`): nothing a policy can mean
        doc.issues.append(PolicyIssue(format_path(path), _SELF_ALIAS, None))
        return
    open_nodes = open_nodes | {id(node)}
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            child = (*path, key)
            if key in seen:
                where = format_path(path) or "the top level"
                doc.issues.append(
                    PolicyIssue(
                        format_path(child),
                        f"key {key!r} appears twice in {where} (first on line {seen[key]}); keep one",
                        line,
                    )
                )
                continue
            seen[key] = line
            doc.lines[child] = line
            _walk(value_node, child, doc, open_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            doc.lines[child] = item.start_mark.line + 1
            _walk(item, child, doc, open_nodes)

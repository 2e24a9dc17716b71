"""The SCIM filters we answer: `eq` comparisons joined by `and` (RFC 7644 §3.4.2.2, the subset IdPs use).

Entra ID documents that it only sends `eq` and `and`; Okta only `eq`. So rather than evaluating the
whole filter grammar in memory, a filter becomes a conjunction of equalities the store turns into
SQL. Anything else (`or`, `not`, `pr`, `co`, `sw`, ...) is refused with a message naming it, which
the server answers as SCIM `invalidFilter`.

Accepted: `userName eq "bjensen"`, `externalId eq jyoung` (Entra's documentation shows unquoted
values), `(displayName eq "x")`, `emails[type eq "work"].value eq "a@b"`, `members eq "id"`,
`urn:ietf:params:scim:schemas:core:2.0:User:userName eq "x"`. Attribute names are case-insensitive.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_CORE_PREFIXES = (
    "urn:ietf:params:scim:schemas:core:2.0:user:",
    "urn:ietf:params:scim:schemas:core:2.0:group:",
)

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<lpar>\() | (?P<rpar>\))
      | (?P<word>[^\s()"\[]+(?:\[[^\]]*\])?[^\s()"]*)
    )""",
    re.VERBOSE,
)

FilterValue = str | bool | int | float | None

#: Deepest bracket nesting read. IdPs send one level at most; a deeper filter is refused before the
#: parser recurses (5,000 nested brackets would otherwise exhaust Python's stack).
MAX_DEPTH = 16
#: Longest filter read: far above `userName eq "…"` and Entra's membership checks.
MAX_LENGTH = 4096


class FilterError(ValueError):
    """The filter is malformed or uses something we do not answer."""


@dataclass(frozen=True, slots=True)
class Equals:
    """`attribute eq value`; `attribute` is lower case without the core schema prefix."""

    attribute: str
    value: FilterValue


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"cannot read the filter at {text[pos : pos + 20]!r}")
        kind = m.lastgroup or "word"
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _value(kind: str, raw: str) -> FilterValue:
    if kind == "string":
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise FilterError(f"bad string {raw}") from exc
        assert isinstance(decoded, str)
        return decoded
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    return raw  # a bare word, as in Entra's `externalId eq jyoung`


def _attribute(raw: str) -> str:
    name = raw.lower()
    for prefix in _CORE_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise FilterError("the filter ends too early")
        self.i += 1
        return tok

    def conjunction(self) -> list[Equals]:
        terms = self.term()
        while (tok := self.peek()) is not None and tok[0] == "word" and tok[1].lower() in ("and", "or"):
            if tok[1].lower() == "or":
                raise FilterError("'or' is not supported; only 'eq' comparisons joined by 'and'")
            self.take()
            terms += self.term()
        return terms

    def term(self) -> list[Equals]:
        kind, raw = self.take()
        if kind == "lpar":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise FilterError(f"the filter nests brackets deeper than {MAX_DEPTH} levels")
            inner = self.conjunction()
            self.depth -= 1
            if self.take()[0] != "rpar":
                raise FilterError("missing ')'")
            return inner
        if kind != "word":
            raise FilterError(f"expected an attribute name, found {raw!r}")
        if raw.lower() == "not":
            raise FilterError("'not' is not supported; only 'eq' comparisons joined by 'and'")
        _, op = self.take()
        if op.lower() != "eq":
            raise FilterError(f"operator {op!r} is not supported; only 'eq' (joined by 'and')")
        vkind, vraw = self.take()
        if vkind not in ("string", "word"):
            raise FilterError(f"expected a value after 'eq', found {vraw!r}")
        return [Equals(_attribute(raw), _value(vkind, vraw))]


def parse_filter(text: str) -> tuple[Equals, ...]:
    """The equalities a filter asks for, all of which must hold. Raises `FilterError`."""
    if not text.strip():
        raise FilterError("the filter is empty")
    if len(text) > MAX_LENGTH:
        raise FilterError(f"the filter is {len(text)} characters long; at most {MAX_LENGTH}")
    parser = _Parser(_tokens(text))
    terms = parser.conjunction()
    extra = parser.peek()
    if extra is not None:
        raise FilterError(f"unexpected {extra[1]!r} after the filter")
    return tuple(terms)

"""Property: whatever the file says, parsing returns a Policy or raises PolicyError — never crashes."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_helpers import EXAMPLE

from gpucommons.policy import PolicyError, parse_policy

EXAMPLE_DATA = yaml.safe_load(EXAMPLE.read_text())

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


ALL_PATHS = [p for p in _paths(EXAMPLE_DATA) if p]


@st.composite
def mutated_examples(draw: st.DrawFn) -> str:
    data = copy.deepcopy(EXAMPLE_DATA)
    for path in draw(st.lists(st.sampled_from(ALL_PATHS), min_size=1, max_size=4)):
        parent: Any = data
        try:
            for part in path[:-1]:
                parent = parent[part]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    return yaml.safe_dump(data, sort_keys=False)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_examples())
def test_any_mutation_of_the_example_is_parsed_or_refused_with_issues(text: str) -> None:
    try:
        parse_policy(text)
    except PolicyError as error:
        assert error.issues
        for issue in error.issues:
            assert issue.message and (issue.line is None or issue.line >= 1)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_is_parsed_or_refused(text: str) -> None:
    try:
        parse_policy(text)
    except PolicyError as error:
        assert error.issues

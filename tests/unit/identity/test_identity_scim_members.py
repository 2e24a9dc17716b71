"""Membership PATCHes taken on the cheap path: which shapes qualify, and what they do."""

from __future__ import annotations

from typing import Any

import pytest

from gpucommons.identity.scim import MemberEdit, apply_member_edits, members_only_patch


def _ops(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": list(operations)}


def test_okta_remove_by_filter_then_add() -> None:
    edits = members_only_patch(
        _ops(
            {"op": "remove", "path": 'members[value eq "89bb"]'},
            {"op": "add", "path": "members", "value": [{"value": "23a3", "display": "test.user@okta.local"}]},
        )
    )
    assert edits == [
        MemberEdit("remove", ids=("89bb",)),
        MemberEdit("add", entries=({"value": "23a3", "display": "test.user@okta.local"},)),
    ]


def test_entra_add_and_remove_with_value_lists_and_null_refs() -> None:
    add = members_only_patch(
        _ops({"op": "Add", "path": "members", "value": [{"$ref": None, "value": "f648"}]})
    )
    remove = members_only_patch(
        _ops({"op": "Remove", "path": "members", "value": [{"$ref": None, "value": "f648"}]})
    )
    assert add == [MemberEdit("add", entries=({"value": "f648"},))]
    assert remove == [MemberEdit("remove", ids=("f648",))]


@pytest.mark.parametrize(
    "payload",
    [
        _ops({"op": "replace", "path": "displayName", "value": "x"}),
        _ops(
            {"op": "add", "path": "members", "value": [{"value": "a"}]},
            {"op": "replace", "value": {"displayName": "x"}},
        ),
        _ops({"op": "add", "path": "members", "value": [{"display": "no value"}]}),
        _ops({"op": "add", "path": 'members[value eq "a"].display', "value": "x"}),
        _ops({"op": "move", "path": "members", "value": []}),
        {"schemas": [], "Operations": []},
        "not a dict",
    ],
)
def test_anything_else_takes_the_general_path(payload: Any) -> None:
    assert members_only_patch(payload) is None


def test_edits_keep_order_and_one_entry_per_member() -> None:
    members = [{"value": "a"}, {"value": "b", "display": "B"}]
    after = apply_member_edits(
        members,
        [
            MemberEdit("add", entries=({"value": "b", "display": "other"}, {"value": "c"})),
            MemberEdit("remove", ids=("a", "zz")),
        ],
    )
    assert after == [{"value": "b", "display": "B"}, {"value": "c"}]
    assert apply_member_edits(after, [MemberEdit("replace", entries=({"value": "d"},))]) == [{"value": "d"}]
    assert apply_member_edits(after, [MemberEdit("remove_all")]) == []
    assert members == [{"value": "a"}, {"value": "b", "display": "B"}]  # the input is left alone

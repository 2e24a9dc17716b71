"""The policy file's JSON Schema, for editors (yaml-language-server) and other tools.

Generated from the pydantic models, so it cannot drift from what `parse_policy` accepts. Two
adjustments for people: exact decimals are shown as numbers (pydantic also offers strings, which
editors then suggest), and field titles are dropped in favour of the descriptions.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from gpucommons.policy.schema import PolicyFile

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _PolicySchemaGenerator(GenerateJsonSchema):
    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        out: dict[str, Any] = {"type": "number"}
        for key, json_key in (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum")):
            bound = schema.get(key)
            if bound is not None:
                out[json_key] = _number(bound)
        return out

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, Decimal):
            return _number(dft)
        return super().encode_default(dft)


def _number(value: Any) -> int | float:
    exact = Decimal(value)
    return int(exact) if exact == exact.to_integral_value() else float(exact)


def _drop_titles(node: Any) -> None:
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            for prop in properties.values():
                if isinstance(prop, dict):
                    prop.pop("title", None)
        for value in node.values():
            _drop_titles(value)
    elif isinstance(node, list):
        for value in node:
            _drop_titles(value)


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of commons.yaml, with a description on every key."""
    schema = PolicyFile.model_json_schema(schema_generator=_PolicySchemaGenerator)
    _drop_titles(schema)
    return {"$schema": SCHEMA_DIALECT, **schema}

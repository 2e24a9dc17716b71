"""Field types every request of the API is read with: the one place where "what the store can hold"
is decided, so that bad input is a 422 naming the field instead of a database error (a 500).

- Integers compared with stored ones fit the column: `INT32_MAX` for an `Integer` column (PostgreSQL's
  `integer` is 32 bits: event and audit ids), `INT64_MAX` at most (SQLite's binding overflows beyond).
- Text never holds NUL (PostgreSQL refuses it in text) nor lone surrogates (not encodable as
  UTF-8, so no database stores them): the `TEXT_PATTERN` both refuses and documents it, so the
  OpenAPI document says what is accepted.
- Instants are ISO-8601 text (`2026-11-01T00:00:00Z`); a number such as `0.5` is refused rather
  than read as seconds since 1970, and a time without an offset is read as UTC (never as the
  server's local time).

The server's input guard applies the same text rule to every path and query parameter
(`server.input_guard`). Pydantic only: the client shares these types.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema

#: The largest integer both SQLite and PostgreSQL (BIGINT) store.
INT64_MAX = 2**63 - 1
#: The largest value of an `Integer` column on PostgreSQL (`integer`, 32 bits): ids of events and
#: audit rows.
INT32_MAX = 2**31 - 1
#: Text without NUL, for `StringConstraints(pattern=...)`: a pattern also refuses lone surrogates
#: (pydantic cannot match them), so this one rule covers both.
TEXT_PATTERN = r"^[^\x00]*$"


def has_unstorable_text(value: str) -> bool:
    """True when `value` holds a NUL or a lone surrogate (what no database stores as text)."""
    if "\x00" in value:
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: ISO-8601 dates and times start with a four-digit year.
_ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _iso_only(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_START.match(value):
        raise ValueError("give an ISO-8601 date and time such as 2026-11-01T00:00:00Z, not a number")
    return value


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59-23:59 is past the last instant Python holds in UTC
        raise ValueError("the time is out of range once converted to UTC") from None


#: A point in time read from ISO-8601 text; without an offset it is UTC.
Instant = Annotated[
    datetime,
    BeforeValidator(_iso_only),
    AfterValidator(_utc),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]

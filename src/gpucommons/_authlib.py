"""authlib's httpx OAuth2 client, imported without its "httpx is deprecated" warning.

Without the optional `httpx2` package, authlib's httpx integration warns on import that plain httpx
is deprecated. GPU Commons uses plain httpx on purpose, and the warning, printed at every server start
and every `commons login`, says nothing to the person reading it. Only that one message is ignored,
only around this import; `authlib.deprecate`, imported first, keeps its own filter for every other
deprecation.
"""

from __future__ import annotations

import warnings

import authlib.deprecate

with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore",
        message="The httpx module is deprecated",
        category=authlib.deprecate.AuthlibDeprecationWarning,
    )
    from authlib.integrations.httpx_client import OAuth2Client

__all__ = ["OAuth2Client"]

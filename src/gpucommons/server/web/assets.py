"""The dashboard's static files, read once from the package and served from memory.

Serving from a fixed catalogue (rather than a directory mount) means a request can only ever name a
file that ships in the package: no path traversal to think about, and an ETag per file so a browser
revalidates cheaply instead of running stale JavaScript after an upgrade.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

#: File types the dashboard ships, and the media type each is served with.
MEDIA_TYPES: dict[str, str] = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    #: A strong validator: the first 16 hex digits of the body's SHA-256, quoted as HTTP wants.
    etag: str


def _walk(directory: resources.abc.Traversable, prefix: str) -> dict[str, Asset]:
    found: dict[str, Asset] = {}
    for entry in directory.iterdir():
        name = f"{prefix}{entry.name}"
        if entry.is_dir():
            found.update(_walk(entry, f"{name}/"))
            continue
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if suffix in MEDIA_TYPES:
            body = entry.read_bytes()
            digest = hashlib.sha256(body).hexdigest()[:16]
            found[name] = Asset(body=body, media_type=MEDIA_TYPES[suffix], etag=f'"{digest}"')
    return found


@cache
def catalogue() -> dict[str, Asset]:
    """Every servable file under `static/`, keyed by its path relative to it (`views/tasks.js`)."""
    return _walk(resources.files(__package__).joinpath("static"), "")


def template_text(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")

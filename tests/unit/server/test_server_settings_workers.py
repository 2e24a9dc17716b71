"""`--workers N` (COMMONS_WORKERS) is a matter of the database: several processes need PostgreSQL
with shared leadership, and the refusal says why and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucommons.domain.election import Sharing
from gpucommons.server.settings import Settings

PG = "postgresql+psycopg://commons@db.example/commons"


def test_one_worker_is_any_database(tmp_path: Path) -> None:
    assert Settings(home=tmp_path).sharing() is Sharing.SINGLE
    assert Settings(home=tmp_path, database_url=PG).sharing() is Sharing.SHARED


def test_several_workers_share_a_postgresql_database(tmp_path: Path) -> None:
    assert Settings(home=tmp_path, database_url=PG, workers=4).sharing() is Sharing.SHARED
    assert (
        Settings(home=tmp_path, database_url=PG, workers=4, leadership="shared").sharing() is Sharing.SHARED
    )


@pytest.mark.parametrize(
    ("database_url", "leadership", "why"),
    [
        (None, "auto", "a SQLite database serves one server process"),
        (PG, "single", "COMMONS_LEADERSHIP is single"),
    ],
)
def test_several_workers_without_shared_leadership_are_refused(
    tmp_path: Path, database_url: str | None, leadership: str, why: str
) -> None:
    settings = Settings(home=tmp_path, database_url=database_url, workers=2, leadership=leadership)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--workers 2 \\(COMMONS_WORKERS\\) needs PostgreSQL") as raised:
        settings.sharing()
    assert why in str(raised.value)


def test_workers_from_the_environment_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMONS_WORKERS", "3")
    assert Settings().workers == 3
    monkeypatch.setenv("COMMONS_WORKERS", "0")
    with pytest.raises(ValueError, match="workers"):
        Settings()

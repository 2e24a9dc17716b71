"""Throwaway team accounts for tests that run tasks as real Unix users (root only)."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gpucommons.backends.local.accounts import IsolationMode, TeamAccounts


@contextmanager
def scratch_team_accounts(teams: Sequence[str], tag: str = "ct") -> Iterator[TeamAccounts]:
    """`TeamAccounts` in a fresh home under /tmp (not under pytest's tmp_path: its parent is 0700,
    which team accounts could not cross), with a per-run account prefix (`<tag><hex>-`) so parallel
    runs never share an account; the accounts of `teams` and the home are removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="commons-iso-", dir="/tmp"))
    home.chmod(0o755)
    accounts = TeamAccounts(home, prefix=f"{tag}{secrets.token_hex(3)}-", mode=IsolationMode.ACCOUNTS)
    try:
        yield accounts
    finally:
        for team in teams:
            accounts.remove_account(team)
        shutil.rmtree(home, ignore_errors=True)

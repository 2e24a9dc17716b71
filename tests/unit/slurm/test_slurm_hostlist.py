"""Slurm host lists: what squeue and scontrol print, and what --nodelist takes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucommons.backends.slurm.hostlist import HostlistError, compress, expand


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("n1", ("n1",)),
        ("n[2-3]", ("n2", "n3")),
        ("n[1-2,4],login", ("n1", "n2", "n4", "login")),
        ("gpu[08-10]", ("gpu08", "gpu09", "gpu10")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
        ("", ()),
        ("(null)", ()),
        ("None assigned", ()),
    ],
)
def test_expand_reads_what_slurm_prints(text: str, names: tuple[str, ...]) -> None:
    assert expand(text) == names


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (("n1",), "n1"),
        (("n1", "n2", "n3", "n4"), "n[1-4]"),
        (("n4", "n1", "n2"), "n[1-2,4]"),
        (("gpu08", "gpu09"), "gpu[08-09]"),
        (("login", "n1", "n2"), "login,n[1-2]"),
    ],
)
def test_compress_writes_the_form_nodelist_takes(names: tuple[str, ...], text: str) -> None:
    assert compress(names) == text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("n[1-3", "leaves a bracket open"),
        ("n1-3]", "never opened"),
        ("n[3-1]", "runs backwards"),
        ("n[a-b]", "not a number"),
        ("n1,,n2", "empty name"),
        ("n[1-99999999]", "more than"),
    ],
)
def test_a_malformed_host_list_is_refused_with_the_reason(text: str, words: str) -> None:
    with pytest.raises(HostlistError, match=words):
        expand(text)


names = st.lists(
    st.builds(
        lambda prefix, number, pad: f"{prefix}{number:0{pad}d}",
        st.sampled_from(["n", "gpu", "node-a"]),
        st.integers(0, 200),
        st.sampled_from([0, 3]),
    ),
    min_size=1,
    max_size=30,
)


@given(names)
def test_compress_then_expand_gives_back_the_same_nodes(hosts: list[str]) -> None:
    assert set(expand(compress(hosts))) == set(hosts)

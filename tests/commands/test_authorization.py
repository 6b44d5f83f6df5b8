"""The authorization checks, as properties over any grant and any project."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.commands.authorization import (
    GLOBAL_SCOPES,
    may_admin,
    may_read,
    may_write,
    require_admin,
    require_read,
    require_write,
)
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.projections.access import Grant

PROJECTS = ["3f9a0c1b2d4e5f60", "a1b2c3d4e5f60718", "0123456789abcdef", "global"]
projects = st.sampled_from(PROJECTS)
asked = st.sampled_from([*PROJECTS, ""])
grants = st.builds(
    Grant, key_name=st.just("k"), public_key=st.just("x" * 40),
    principal=st.sampled_from(["ada", "bo"]), read=st.frozensets(projects),
    write=st.frozensets(projects), admin=st.booleans(), granted_at=st.integers(1, 10))
maybe_grants = st.none() | grants


@given(maybe_grants, asked)
def test_read_needs_a_read_grant_except_for_global_lessons(grant: Grant | None,
                                                           project: str) -> None:
    expected = grant is not None and (project in GLOBAL_SCOPES or project in grant.read)
    assert may_read(grant, project) is expected


@given(maybe_grants, asked)
def test_write_needs_a_write_grant_even_for_global(grant: Grant | None, project: str) -> None:
    expected = grant is not None and (project or "global") in grant.write
    assert may_write(grant, project) is expected


@given(grants, projects)
def test_neither_write_nor_admin_implies_read(grant: Grant, project: str) -> None:
    if project not in grant.read and project not in GLOBAL_SCOPES:
        assert not may_read(grant, project)
    if project not in grant.write:
        assert not may_write(grant, project)


@given(asked)
def test_no_grant_allows_nothing(project: str) -> None:
    assert not may_read(None, project)
    assert not may_write(None, project)
    assert not may_admin(None)


@given(maybe_grants, asked)
def test_each_require_raises_exactly_when_its_may_says_no_and_names_what_is_needed(
        grant: Grant | None, project: str) -> None:
    principal = grant.principal if grant is not None else ""
    for may, require, needed, where in (
            (may_read, require_read, "read", project),
            (may_write, require_write, "write", project or "global")):
        if may(grant, project):
            require(grant, project)
        else:
            with pytest.raises(AccessRefusedError) as caught:
                require(grant, project)
            e = caught.value
            assert (e.principal, e.project, e.needed) == (principal, where, needed)
            assert f"--{needed} {where}" in str(e)
    if may_admin(grant):
        require_admin(grant)
    else:
        with pytest.raises(AccessRefusedError, match="--admin") as refused:
            require_admin(grant, "erase")
        assert (refused.value.principal, refused.value.needed) == (principal, "admin")

"""SemVer 2.0.0 versions and npm/Cargo ranges (``core.semver``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llamon_agent.core.semver import (
    InvalidVersionError,
    InvalidVersionRangeError,
    Version,
    VersionRange,
)

PUBLISHED = [
    "0.3.1",
    "0.3.9",
    "0.4.0",
    "1.0.0",
    "1.4.2",
    "2.0.0",
    "2.1.0",
    "2.1.5",
    "2.2.0-rc.1",
    "2.9.9",
    "3.0.0",
]


def matching(text: str) -> list[str]:
    """The published versions ``text`` selects, in order."""
    selected = VersionRange.parse(text)
    return [v for v in PUBLISHED if selected.matches(Version.parse(v))]


def test_a_version_reads_its_parts_and_prints_as_written() -> None:
    version = Version.parse("2.1.0-rc.1+build.5")
    assert version.release == (2, 1, 0)
    assert version.prerelease == ("rc", "1")
    assert version.build == "build.5"
    assert version.is_prerelease
    assert str(version) == "2.1.0-rc.1+build.5"


def test_precedence_follows_the_semver_specification() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.10.0",
        "2.0.0",
    ]
    versions = [Version.parse(text) for text in ordered]
    assert sorted(reversed(versions)) == versions
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("v1.0.0", "drop the leading 'v'"),
        ("1.0", "it needs three numbers"),
        ("01.0.0", "'01' has a leading zero"),
        ("1.0.0-", "pre-release or build part"),
        ("", "it is empty"),
        ("1.x.0", "'x' is not a number"),
        ("1.0.1000000000", "each number is at most"),
    ],
)
def test_a_text_that_is_not_a_version_is_refused_naming_the_rule(text: str, says: str) -> None:
    with pytest.raises(InvalidVersionError) as caught:
        Version.parse(text)
    assert says in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("^2.1", ["2.1.0", "2.1.5", "2.9.9"]),
        ("~2.1", ["2.1.0", "2.1.5"]),
        ("2", ["2.0.0", "2.1.0", "2.1.5", "2.9.9"]),
        ("2.x", ["2.0.0", "2.1.0", "2.1.5", "2.9.9"]),
        ("2.1", ["2.1.0", "2.1.5"]),
        (">=2 <3", ["2.0.0", "2.1.0", "2.1.5", "2.9.9"]),
        ("^1.4 || ^2", ["1.4.2", "2.0.0", "2.1.0", "2.1.5", "2.9.9"]),
        ("2.1.5", ["2.1.5"]),
        ("=2.1.5", ["2.1.5"]),
        ("^0.3", ["0.3.1", "0.3.9"]),
        ("~0.3.2", ["0.3.9"]),
        (">2.1", ["2.9.9", "3.0.0"]),
        ("<=1", ["0.3.1", "0.3.9", "0.4.0", "1.0.0", "1.4.2"]),
        ("<1.0.0", ["0.3.1", "0.3.9", "0.4.0"]),
        ("^2.2.0-rc.0", ["2.2.0-rc.1", "2.9.9"]),
    ],
)
def test_each_range_form_selects_what_npm_would(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize("text", ["*", "latest", "", "x"])
def test_any_version_forms_select_every_release(text: str) -> None:
    assert matching(text) == [v for v in PUBLISHED if "-" not in v]


def test_best_is_the_highest_match_or_none() -> None:
    versions = [Version.parse(v) for v in PUBLISHED]
    assert str(VersionRange.parse("^2.1").best(versions)) == "2.9.9"
    assert VersionRange.parse("^4").best(versions) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("^^2", "is not a version range"),
        (">=", "is not a version range"),
        ("2.x.1", "has a number after a wildcard"),
        ("foo", "'foo' is not a version or a partial version"),
        ("<x", "matches nothing"),
    ],
)
def test_a_text_that_is_not_a_range_is_refused_naming_it(text: str, says: str) -> None:
    with pytest.raises(InvalidVersionRangeError) as caught:
        VersionRange.parse(text)
    assert says in str(caught.value)


_numbers = st.integers(min_value=0, max_value=50)
_ident = st.one_of(
    st.integers(min_value=0, max_value=30).map(str),
    st.sampled_from(["alpha", "beta", "rc", "a-b", "x1"]),
)
versions = st.builds(
    Version,
    _numbers,
    _numbers,
    _numbers,
    st.lists(_ident, max_size=3).map(tuple),
)


@given(versions, versions)
def test_the_sort_key_orders_as_precedence_does(a: Version, b: Version) -> None:
    assert (a.sort_key < b.sort_key) == (a < b)
    assert (a.sort_key == b.sort_key) == (a == b)


@given(versions)
def test_a_printed_version_reads_back_equal(version: Version) -> None:
    assert Version.parse(str(version)) == version

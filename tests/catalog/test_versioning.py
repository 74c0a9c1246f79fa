"""The catalog's versioning rule: the change a card makes and the bump its number must be."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llamon_agent.catalog.versioning import (
    Bump,
    Change,
    SkillChange,
    bump_between,
    check_bump,
    classify_change,
    minimum_version,
    predecessor,
)
from llamon_agent.core.semver import Version

V = Version.parse


def skill(skill_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": skill_id, "name": skill_id.title(), "description": "d", "tags": ["t"], **fields}


def card(*skills: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "name": "Orders",
        "description": "Looks up and cancels orders for the shop's customers.",
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": list(skills),
        **fields,
    }


# ------------------------------------------------------------------ classify_change


def test_same_card_is_a_patch() -> None:
    base = card(skill("search"), skill("cancel"))
    assert classify_change(base, base) == Change("patch")


def test_descriptions_names_tags_examples_and_other_fields_are_a_patch() -> None:
    before = card(skill("search", examples=["find order 1"]))
    after = card(
        skill("search", name="Find", description="Finds one order", tags=["x"], examples=[]),
        description="Finds orders, now with a longer description than before.",
        name="Orders Desk",
        version="9.9.9",
        documentationUrl="https://example.com/docs",
    )
    assert classify_change(before, after) == Change("patch")


def test_a_skill_added_is_minor() -> None:
    change = classify_change(card(skill("search")), card(skill("search"), skill("cancel")))
    assert change == Change("minor", (SkillChange("cancel", "added"),))
    assert change.driver == SkillChange("cancel", "added")


def test_a_skill_removed_is_major() -> None:
    change = classify_change(card(skill("search"), skill("cancel")), card(skill("search")))
    assert change == Change("major", (SkillChange("cancel", "removed"),))


def test_a_skill_renamed_by_id_is_removed_and_added_so_major() -> None:
    change = classify_change(card(skill("search")), card(skill("find")))
    assert change.kind == "major"
    assert change.skills == (SkillChange("find", "added"), SkillChange("search", "removed"))
    assert change.driver == SkillChange("search", "removed")


def test_a_skills_own_input_modes_changed_is_major() -> None:
    before = card(skill("search"))
    after = card(skill("search", inputModes=["application/json"]))
    change = classify_change(before, after)
    assert change == Change(
        "major",
        (
            SkillChange(
                "search",
                "modes_changed",
                (("text/plain",), ("text/plain",)),
                (("application/json",), ("text/plain",)),
            ),
        ),
    )
    assert change.skills[0].describe() == (
        "skill 'search' changed its input modes from ['text/plain'] to ['application/json']"
    )


def test_a_card_default_mode_change_reaches_skills_without_their_own() -> None:
    before = card(skill("search"), skill("cancel", outputModes=["text/plain"]))
    after = card(
        skill("search"), skill("cancel", outputModes=["text/plain"]), defaultOutputModes=["a/b"]
    )
    change = classify_change(before, after)
    assert change.kind == "major"
    assert [item.skill for item in change.skills] == ["search"]
    assert change.skills[0].describe() == (
        "skill 'search' changed its output modes from ['text/plain'] to ['a/b']"
    )


def test_both_mode_kinds_changed_are_named() -> None:
    after = card(skill("search", inputModes=["a/b"], outputModes=["c/d"]))
    change = classify_change(card(skill("search")), after)
    assert change.skills[0].describe() == (
        "skill 'search' changed its input modes from ['text/plain'] to ['a/b'] and its "
        "output modes from ['text/plain'] to ['c/d']"
    )


def test_the_same_modes_in_another_order_or_case_or_made_explicit_are_no_change() -> None:
    before = card(skill("search"), defaultInputModes=["text/plain", "application/json"])
    after = card(
        skill("search", inputModes=["Application/JSON", "text/plain"]),
        defaultInputModes=["text/plain", "application/json"],
    )
    assert classify_change(before, after) == Change("patch")


def test_removed_outweighs_added() -> None:
    change = classify_change(card(skill("a")), card(skill("b"), skill("c")))
    assert change.kind == "major"
    assert change.driver == SkillChange("a", "removed")


def test_malformed_skill_lists_are_read_without_failing() -> None:
    weird: dict[str, Any] = {"skills": [1, {"id": 2}, {"name": "x"}, {"id": "ok"}]}
    assert classify_change({"skills": "no"}, weird) == Change(
        "minor", (SkillChange("ok", "added"),)
    )
    assert classify_change({}, {}) == Change("patch")


# ------------------------------------------------------------------ predecessor


def test_predecessor_is_the_highest_version_below() -> None:
    existing = [V("1.0.0"), V("1.4.0"), V("2.0.0"), V("0.9.0")]
    assert predecessor(existing, V("1.5.0")) == V("1.4.0")
    assert predecessor(existing, V("3.0.0")) == V("2.0.0")
    assert predecessor(existing, V("0.1.0")) is None


def test_a_backport_is_compared_with_its_own_predecessor() -> None:
    assert predecessor([V("1.4.0"), V("2.0.0")], V("1.4.1")) == V("1.4.0")


def test_drafts_of_the_same_release_are_passed_over() -> None:
    existing = [V("1.4.0"), V("2.0.0-rc.1"), V("2.0.0-rc.2")]
    assert predecessor(existing, V("2.0.0")) == V("1.4.0")
    assert predecessor(existing, V("2.0.0-rc.3")) == V("1.4.0")
    assert predecessor(existing, V("2.0.1")) == V("2.0.0-rc.2")


# ------------------------------------------------------------------ check_bump

REMOVED = Change("major", (SkillChange("search", "removed"),))
ADDED = Change("minor", (SkillChange("cancel", "added"),))
PATCH = Change("patch")


def test_a_removed_skill_as_a_minor_is_refused_naming_skill_and_smallest_version() -> None:
    assert check_bump(V("1.2.0"), V("1.3.0"), REMOVED) == (
        "skill 'search' was removed: that needs a major version (2.0.0 or higher), not 1.3.0"
    )


def test_an_added_skill_as_a_patch_is_refused() -> None:
    assert check_bump(V("1.2.3"), V("1.2.4"), ADDED) == (
        "skill 'cancel' was added: that needs a minor version (1.3.0 or higher), not 1.2.4"
    )


@pytest.mark.parametrize(
    ("previous", "new", "change"),
    [
        ("1.2.0", "2.0.0", REMOVED),
        ("1.2.0", "3.1.4", REMOVED),
        ("1.2.0", "2.0.0-rc.1", REMOVED),
        ("1.2.3", "1.3.0", ADDED),
        ("1.2.3", "2.0.0", ADDED),
        ("1.2.3", "1.2.4", PATCH),
        ("1.2.3", "1.2.4-beta", PATCH),
        ("0.3.1", "1.0.0", REMOVED),
        ("2.0.0-rc.1", "2.1.0", ADDED),
    ],
)
def test_big_enough_bumps_are_accepted(previous: str, new: str, change: Change) -> None:
    assert check_bump(V(previous), V(new), change) is None


def test_a_prerelease_of_a_minor_is_not_a_major() -> None:
    assert check_bump(V("1.2.0"), V("1.3.0-rc.1"), REMOVED) == (
        "skill 'search' was removed: that needs a major version (2.0.0 or higher), not 1.3.0-rc.1"
    )


def test_zero_major_versions_follow_the_same_rule() -> None:
    assert check_bump(V("0.3.1"), V("0.4.0"), REMOVED) == (
        "skill 'search' was removed: that needs a major version (1.0.0 or higher), not 0.4.0"
    )


def test_modes_changed_is_named_in_the_refusal() -> None:
    change = classify_change(
        card(skill("search")), card(skill("search", outputModes=["application/json"]))
    )
    assert check_bump(V("1.0.0"), V("1.0.1"), change) == (
        "skill 'search' changed its output modes from ['text/plain'] to ['application/json']: "
        "that needs a major version (2.0.0 or higher), not 1.0.1"
    )


def test_minimum_versions() -> None:
    assert minimum_version(V("1.2.3"), "major") == V("2.0.0")
    assert minimum_version(V("1.2.3"), "minor") == V("1.3.0")
    assert minimum_version(V("1.2.3"), "patch") == V("1.2.4")
    assert minimum_version(V("1.2.3-rc.1"), "patch") == V("1.2.3")


# ------------------------------------------------------------------ properties

_ORDER: dict[Bump, int] = {"patch": 0, "minor": 1, "major": 2}

numbers = st.integers(min_value=0, max_value=20)
prereleases = st.one_of(st.just(()), st.tuples(st.sampled_from(["alpha", "rc", "1"])))
versions = st.builds(Version, numbers, numbers, numbers, prereleases)
changes = st.sampled_from([REMOVED, ADDED, PATCH])


@given(versions, versions, changes)
def test_an_accepted_version_is_never_a_smaller_bump_than_its_change(
    previous: Version, new: Version, change: Change
) -> None:
    if not new > previous:
        return
    if check_bump(previous, new, change) is None:
        assert _ORDER[bump_between(previous, new)] >= _ORDER[change.kind]
        if change.kind == "major":
            assert new.major > previous.major
        if change.kind == "minor":
            assert new.release >= (previous.major, previous.minor + 1, 0)


@given(versions, changes)
def test_the_version_a_refusal_names_is_accepted_and_nothing_smaller_is(
    previous: Version, change: Change
) -> None:
    smallest = minimum_version(previous, change.kind)
    assert check_bump(previous, smallest, change) is None
    below = [
        Version(smallest.major, smallest.minor, smallest.patch - 1)
        if smallest.patch
        else Version(smallest.major, smallest.minor - 1, 99)
        if smallest.minor
        else Version(smallest.major - 1, 99, 99)
        if smallest.major
        else None
    ]
    for candidate in below:
        if candidate is not None and candidate > previous:
            assert check_bump(previous, candidate, change) is not None


@given(versions, versions, changes)
def test_a_refusal_always_names_the_smallest_accepted_version(
    previous: Version, new: Version, change: Change
) -> None:
    if not new > previous:
        return
    refusal = check_bump(previous, new, change)
    if refusal is not None:
        assert f"({minimum_version(previous, change.kind)} or higher), not {new}" in refusal


@given(st.lists(versions, max_size=8), versions)
def test_the_predecessor_is_below_and_highest(existing: list[Version], new: Version) -> None:
    found = predecessor(existing, new)
    eligible = [
        v for v in existing if v < new and not (v.is_prerelease and v.release == new.release)
    ]
    assert found == (max(eligible) if eligible else None)

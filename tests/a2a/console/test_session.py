"""Session cookie values: issued to a caller, refused when altered, expired, signed with
another key or for a caller no longer an operator; they hold neither the credential nor
the caller's name."""

from __future__ import annotations

import pytest

from llamon_agent.a2a.console.session import SessionKeys

NOW = 1_800_000_000.0


def test_a_value_names_its_caller_until_it_expires() -> None:
    keys = SessionKeys(b"secret")
    value = keys.issue("ops", NOW, 60)
    assert keys.caller_of(value, ["", "ops", "audit"], NOW + 59) == "ops"
    assert keys.caller_of(value, ["", "ops"], NOW + 60) is None
    assert keys.caller_of(keys.issue("", NOW, 60), ["", "ops"], NOW) == ""


def test_the_value_holds_no_name_and_no_secret() -> None:
    value = SessionKeys(b"the-signing-secret").issue("operations-team", NOW, 60)
    assert "operations" not in value
    assert "signing" not in value
    assert value.startswith("v1.1800000060.")


@pytest.mark.parametrize("caller_is_gone", [True, False])
def test_a_caller_no_longer_an_operator_is_refused(caller_is_gone: bool) -> None:
    keys = SessionKeys(b"secret")
    value = keys.issue("ops", NOW, 60)
    candidates = [""] if caller_is_gone else ["", "ops"]
    assert keys.caller_of(value, candidates, NOW) == (None if caller_is_gone else "ops")


def test_altered_or_foreign_values_are_refused() -> None:
    keys = SessionKeys(b"secret")
    value = keys.issue("ops", NOW, 60)
    version, expiry, tag, signature = value.split(".")
    forged = [
        f"{version}.{int(expiry) + 1}.{tag}.{signature}",
        f"v2.{expiry}.{tag}.{signature}",
        f"{version}.{expiry}.{keys.issue('', NOW, 60).split('.')[2]}.{signature}",
        value + "x",
        "",
        "v1...",
        "x" * 300,
        SessionKeys(b"another").issue("ops", NOW, 60),
        SessionKeys().issue("ops", NOW, 60),  # a random key per process
    ]
    for candidate in forged:
        assert keys.caller_of(candidate, ["", "ops"], NOW) is None, candidate

"""``data.cause``: the failure's path across agents, its hops, depth bound and scrubbing.

``Remote`` below is a test double of the client's ``RemoteAgentError`` contract: an
exception from a called agent that carries the called agent's answer (``carried``) and
``cause_hops`` -- the called agent's own hop first, then the hops of its ``data.cause``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamon_agent.core.cause import (
    MAX_CAUSE_DEPTH,
    CarriesCause,
    CauseHop,
    _carries_cause,
    cause_chain,
    cause_hops_of,
    normalize_cause,
)
from llamon_agent.core.codes import ErrorCode, ErrorRule
from llamon_agent.core.error_data import (
    ApplicationErrorData,
    ProtocolErrorData,
    make_application_error_data,
)
from llamon_agent.core.errors import error_data_for_exception, raise_application_error
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import ComponentInvokeError, LlamonApplicationError, LlamonError
from tests._support.secret_strategies import SecretSample, secret_samples

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None)

HOP_C = {
    "agent": "agent-c",
    "taskId": "7f1c2d3e-0000-4000-8000-00000000000c",
    "errorCode": "UPSTREAM_UNAVAILABLE",
    "errorReason": "ocr_service_down",
    "errorSource": "http:ocr/recognize",
}
HOP_B = {
    "agent": "agent-b",
    "taskId": "7f1c2d3e-0000-4000-8000-00000000000b",
    "errorCode": "UPSTREAM_UNAVAILABLE",
    "errorReason": "ocr_service_down",
}


class Remote(LlamonError):
    """Test double of the client's RemoteAgentError: the called agent's answer and path."""

    def __init__(
        self,
        hops: Sequence[object],
        *,
        code: ErrorCode = ErrorCode.UPSTREAM_UNAVAILABLE,
        reason: str = "ocr_service_down",
    ) -> None:
        super().__init__("the called agent failed")
        self._hops = list(hops)  # as the contract says, or malformed on purpose
        self._rule = ErrorRule(code, reason, True)

    @property
    def carried(self) -> ErrorRule:
        return self._rule

    @property
    def cause_hops(self) -> list[object]:
        return self._hops


class BrokenHops(Exception):
    """An exception whose ``cause_hops`` raises."""

    @property
    def cause_hops(self) -> list[Mapping[str, object]]:
        raise RuntimeError("no hops today")


def _wire(hops: list[CauseHop] | None) -> list[dict[str, object]] | None:
    return None if hops is None else [hop.to_wire() for hop in hops]


# ---------------------------------------------------------------- the hop and its rules


def test_a_hop_has_camel_case_wire_names_and_drops_unknown_keys() -> None:
    raw = {
        **HOP_C,
        "errorMessage": "OCR at https://ocr.internal:8443 refused",
        "url": "http://10.0.0.7/",
    }
    assert _wire(normalize_cause([raw])) == [HOP_C]
    hop = CauseHop(agent="agent-c", task_id="t-1", error_code=ErrorCode.NOT_FOUND)
    assert hop.to_wire() == {"agent": "agent-c", "taskId": "t-1", "errorCode": "NOT_FOUND"}


def test_any_key_of_a_hop_may_be_absent() -> None:
    assert _wire(normalize_cause([{"agent": "agent-c"}, {"taskId": "t-2"}])) == [
        {"agent": "agent-c"},
        {"taskId": "t-2"},
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("errorCode", "upstream_unavailable"),
        ("errorCode", "TEAPOT"),
        ("errorCode", 503),
        ("taskId", "not a task id"),
        ("taskId", "x" * 129),
        ("taskId", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8"),  # looks like a secret
        ("taskId", "db.example.com:5432"),  # a location, not an id
        ("errorReason", ""),
        ("errorReason", "r" * 129),
        ("errorReason", "인증_실패"),
        ("errorSource", "ocr/recognize"),
        ("errorSource", "smtp:mailer"),
        ("errorSource", "http:with space"),
        ("errorSource", "http:" + "x" * 200),
        ("agent", ""),
        ("agent", 42),
        ("truncated", "yes"),
    ],
)
def test_a_malformed_value_is_left_out_of_its_hop(key: str, value: object) -> None:
    kept = {k: v for k, v in HOP_C.items() if k != key}
    assert _wire(normalize_cause([{**HOP_C, key: value}])) == [kept]


@pytest.mark.parametrize(
    "raw",
    [{}, {"message": "only unknown keys"}, {"errorCode": "NOPE"}, "agent-c", 7, None, ["a"]],
    ids=["empty", "unknown-keys", "nothing-valid", "a-string", "a-number", "none", "a-list"],
)
def test_a_hop_with_nothing_valid_is_dropped(raw: object) -> None:
    assert _wire(normalize_cause([HOP_B, raw, HOP_C])) == [HOP_B, HOP_C]


@pytest.mark.parametrize("value", [None, "agent-c", {"agent": "agent-c"}, 3, [], [{}]])
def test_no_valid_hop_is_no_cause(value: object) -> None:
    assert normalize_cause(value) is None
    data = ApplicationErrorData.model_validate(
        {"errorCode": "INTERNAL_ERROR", "errorReason": "x", "cause": value}
    )
    assert data.cause is None
    assert "cause" not in data.to_wire()


def test_a_malformed_cause_never_fails_the_payload() -> None:
    """A client reading another agent's answer keeps it whatever its cause holds."""
    wire = {
        "errorCode": "UPSTREAM_TIMEOUT",
        "errorReason": "timeout",
        "retriable": True,
        "cause": [{"agent": "agent-c", "errorCode": "BROKEN"}, "junk", {"taskId": "!"}],
    }
    for model in (ApplicationErrorData, ProtocolErrorData):
        data = model.model_validate(wire)
        assert (data.error_code, data.error_reason) == (ErrorCode.UPSTREAM_TIMEOUT, "timeout")
        assert data.to_wire()["cause"] == [{"agent": "agent-c"}]


def test_an_explicit_cause_extra_is_checked_like_any_other() -> None:
    data = make_application_error_data(
        ErrorCode.UPSTREAM_UNAVAILABLE, "ocr_service_down", "down", cause=[HOP_C, 5]
    )
    assert data.to_wire()["cause"] == [HOP_C]
    with pytest.raises(LlamonApplicationError) as raised:
        raise_application_error(
            ErrorCode.UPSTREAM_UNAVAILABLE, "ocr_service_down", message="down", cause=[HOP_C]
        )
    assert error_data_for_exception(raised.value).to_wire()["cause"] == [HOP_C]


# ---------------------------------------------------------------- scrubbing


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (
            {"errorSource": "mcp:ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
            {"errorSource": "mcp:[REDACTED:api_key]"},
        ),
        ({"errorSource": "http:api.example.com:443"}, {"errorSource": "http:[REDACTED:host]"}),
        ({"errorSource": "db:10.0.0.7:5432"}, {"errorSource": "db:[REDACTED:host]"}),
        ({"agent": "ocr.internal.example.com"}, {"agent": "[REDACTED:host]"}),
        ({"agent": "OCR agent at 10.0.0.7"}, {"agent": "OCR agent at [REDACTED:host]"}),
        ({"agent": "a\x00b\nc"}, {"agent": "a b c"}),
        (
            {"errorReason": "failed_at_https://ocr.example.com/v1"},
            {"errorReason": "failed_at_[REDACTED:url]"},
        ),
    ],
    ids=["token-in-source", "host-in-source", "ip-in-source", "host-as-agent", "ip-in-agent",
         "control-chars", "url-in-reason"],
)  # fmt: skip
def test_hop_strings_are_scrubbed_like_an_error_message(
    raw: dict[str, object], shown: dict[str, object]
) -> None:
    assert _wire(normalize_cause([raw])) == [shown]


def test_a_url_with_a_token_in_an_error_source_leaves_neither() -> None:
    hops = normalize_cause([{"errorSource": "http:https://api.example.com/v1?token=abc123"}])
    assert hops is not None
    assert hops[0].error_source is not None
    assert hops[0].error_source.startswith("http:[REDACTED:url]")
    for kept in ("api.example.com", "abc123", "https"):
        assert kept not in hops[0].error_source


def test_an_agent_name_is_bounded() -> None:
    hops = normalize_cause([{"agent": "n" * 1000}])
    assert hops is not None
    assert hops[0].agent is not None
    assert hops[0].agent.startswith("n" * 128)
    assert len(hops[0].agent) < 150


@PROPERTY
@given(sample=secret_samples(), field=st.sampled_from(["agent", "errorReason", "errorSource"]))
def test_no_secret_survives_in_any_hop_field(sample: SecretSample, field: str) -> None:
    value = f"http:{sample.text}" if field == "errorSource" else sample.text
    data = error_data_for_exception(Remote([{field: value}]))
    record = FailureRecord.from_error_data(data)
    cause = data.to_wire().get("cause")
    shown = json.dumps([cause, record.evidence.get("cause")], ensure_ascii=False)
    assert sample.value not in shown


# ---------------------------------------------------------------- depth


def _hops(count: int) -> list[dict[str, object]]:
    return [{"agent": f"agent-{i}", "taskId": f"task-{i}"} for i in range(count)]


def test_a_chain_at_the_bound_is_kept_whole() -> None:
    assert _wire(normalize_cause(_hops(MAX_CAUSE_DEPTH))) == _hops(MAX_CAUSE_DEPTH)


def test_deeper_hops_are_cut_keeping_the_nearest_and_marking_the_last() -> None:
    wire = _wire(normalize_cause(_hops(MAX_CAUSE_DEPTH + 5)))
    expected = _hops(MAX_CAUSE_DEPTH)
    expected[-1] = {**expected[-1], "truncated": True}
    assert wire == expected


def test_a_cut_reported_further_down_is_still_shown() -> None:
    """B's chain was already cut; A adds B's hop in front and cuts again."""
    from_b = _wire(normalize_cause(_hops(MAX_CAUSE_DEPTH + 1)))
    assert from_b is not None
    at_a = _wire(normalize_cause([{"agent": "agent-b"}, *from_b]))
    assert at_a is not None
    assert len(at_a) == MAX_CAUSE_DEPTH
    assert at_a[0] == {"agent": "agent-b"}
    assert [hop.get("truncated") for hop in at_a] == [None] * (MAX_CAUSE_DEPTH - 1) + [True]
    short = _wire(normalize_cause([{"agent": "agent-b"}, {"agent": "c", "truncated": True}]))
    assert short == [{"agent": "agent-b"}, {"agent": "c", "truncated": True}]


def test_the_marker_is_only_on_the_last_hop() -> None:
    hops = _wire(normalize_cause([{"agent": "b", "truncated": True}, {"agent": "c"}]))
    assert hops == [{"agent": "b"}, {"agent": "c", "truncated": True}]


def test_dropped_hops_do_not_count_toward_the_bound() -> None:
    raw: list[object] = ["junk"] * 10 + _hops(MAX_CAUSE_DEPTH) + [{}, 3]
    assert _wire(normalize_cause(raw)) == _hops(MAX_CAUSE_DEPTH)


def test_a_huge_chain_is_read_in_bounded_work() -> None:
    wire = _wire(normalize_cause(["junk"] * 100_000))
    assert wire is None


# ---------------------------------------------------------------- from an exception


def test_an_exception_from_a_called_agent_carries_its_cause() -> None:
    exc = Remote([HOP_B, HOP_C])
    assert isinstance(exc, CarriesCause)
    assert not isinstance(ValueError("x"), CarriesCause)
    data = error_data_for_exception(exc).to_wire()
    assert (data["errorCode"], data["errorReason"]) == ("UPSTREAM_UNAVAILABLE", "ocr_service_down")
    assert data["cause"] == [HOP_B, HOP_C]


def test_the_cause_is_found_through_raise_from() -> None:
    try:
        try:
            raise Remote([HOP_C])
        except Remote as remote:
            raise ComponentInvokeError("OCR step failed") from remote
    except ComponentInvokeError as wrapper:
        exc: BaseException = wrapper
    assert error_data_for_exception(exc).to_wire()["cause"] == [HOP_C]
    assert cause_hops_of(exc) == [HOP_C]


def test_the_implicit_context_is_not_a_cause() -> None:
    exc = ValueError("unrelated")
    exc.__context__ = Remote([HOP_C])  # raised while handling it, not from it
    assert cause_chain(exc) is None
    assert "cause" not in error_data_for_exception(exc).to_wire()


def test_the_cause_is_found_inside_an_exception_group() -> None:
    group = ExceptionGroup("calls", [Remote([HOP_C])])
    assert error_data_for_exception(group).to_wire()["cause"] == [HOP_C]


@pytest.mark.parametrize(
    "exc",
    [BrokenHops("x"), Remote([]), Remote(["junk", {}])],
    ids=["raising-property", "empty", "all-malformed"],
)
def test_no_readable_hop_gives_no_cause_and_the_answer_still_goes_out(exc: Exception) -> None:
    data = error_data_for_exception(exc)
    assert "cause" not in data.to_wire()
    assert data.error_reason != "error_data_build_failed"


def test_hops_that_are_not_a_list_are_ignored() -> None:
    class Odd(Exception):
        cause_hops = "agent-c"

    assert cause_hops_of(Odd()) is None
    assert "cause" not in error_data_for_exception(Odd()).to_wire()


# ---------------------------------------------------------------- the failure record


def test_the_failure_record_keeps_the_same_chain_as_evidence() -> None:
    exc = Remote([HOP_B, {**HOP_C, "errorSource": "http:https://ocr.example.com/?key=s3cr3t"}])
    data = error_data_for_exception(exc)
    from_data = FailureRecord.from_error_data(data).to_dict()
    from_exc = FailureRecord.from_exception(exc).to_dict()
    wire = data.to_wire()["cause"]
    assert from_data["evidence"]["cause"] == wire  # type: ignore[index]
    assert from_exc["evidence"]["cause"] == wire  # type: ignore[index]
    shown = json.dumps([wire, from_data, from_exc])
    assert "ocr.example.com" not in shown
    assert "s3cr3t" not in shown
    assert "dropped_keys" not in from_data["evidence"]  # type: ignore[operator]


class _WithHops(Exception):
    @property
    def cause_hops(self) -> list[dict[str, object]]:
        return []


class _Derived(Exception, CarriesCause):
    @property
    def cause_hops(self) -> list[dict[str, object]]:
        return [{"agent": "b"}]


class _Registered(Exception):
    pass


class _HopsMissing(Exception):
    @property
    def cause_hops(self) -> list[dict[str, object]]:
        raise AttributeError("cause_hops")


CarriesCause.register(_Registered)


@pytest.mark.parametrize(
    "exc", [RuntimeError("x"), _WithHops(), _Derived(), _Registered(), _HopsMissing()]
)
def test_carrying_a_cause_is_the_protocol_check(exc: BaseException) -> None:
    assert _carries_cause(exc) == isinstance(exc, CarriesCause)

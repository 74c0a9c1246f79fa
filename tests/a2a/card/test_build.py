"""Agent Cards: the builder, auth round trip, every lint rule by id, and loading."""

from __future__ import annotations

import copy
import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from a2a.types import AgentCard, AgentProvider, AgentSkill

from llamon_agent.a2a.card import (
    CARD_RULES,
    PROTOCOL_VERSION,
    AuthSpec,
    CardFinding,
    CardLoadError,
    auth_spec_from_card,
    build_agent_card,
    lint_agent_card,
    load_agent_card,
    skill,
)

Card = dict[str, Any]

DOCS = Path(__file__).resolve().parents[3] / "docs" / "agent-card.md"


def good_model(auth: AuthSpec | None = None) -> AgentCard:
    """A card that follows every rule."""
    return build_agent_card(
        name="Flight search agent",
        description=(
            "Searches scheduled passenger flights between two airports on a given date "
            "and returns fares, departure times and carriers as JSON offers."
        ),
        url="https://flights.example.com/a2a",
        version="1.2.0",
        skills=[
            skill(
                "search_flights",
                "Search flights",
                "Finds flights from an origin to a destination airport on one date; "
                'returns JSON {"offers": [{"fare", "departsAt", "carrier"}]}.',
                tags=["flights", "search"],
                examples=["ICN to NRT on 2025-05-01, economy"],
                output_modes=["application/json"],
            )
        ],
        auth=auth or AuthSpec.api_key(),
    )


def good_card() -> Card:
    """The good card as the JSON object a client fetches."""
    return good_model().model_dump(mode="json", exclude_none=True)


# --------------------------------------------------------------------------- builder


def test_builder_declares_protocol_transport_modes_and_capabilities() -> None:
    card = build_agent_card(
        name="n",
        description="d",
        url="https://a.example.com/a2a",
        version="0.1.0",
        skills=[skill("s", "S", "does s", tags=["t"])],
    )
    assert isinstance(card, AgentCard)
    wire = card.model_dump(mode="json", exclude_none=True)
    assert wire["protocolVersion"] == PROTOCOL_VERSION == "0.3.0"
    assert wire["preferredTransport"] == "JSONRPC"
    assert wire["defaultInputModes"] == ["text/plain"]
    assert wire["defaultOutputModes"] == ["text/plain", "application/json"]
    assert wire["capabilities"] == {"streaming": True, "pushNotifications": False}
    assert "securitySchemes" not in wire
    assert "security" not in wire
    assert AgentCard.model_validate(wire) == card


def test_builder_passes_modes_streaming_provider_and_docs() -> None:
    provider = AgentProvider(organization="Example Air", url="https://example.com")
    card = build_agent_card(
        name="n",
        description="d",
        url="https://a.example.com/a2a",
        version="2.0.0",
        skills=[],
        input_modes=["text/plain", "image/png"],
        output_modes=["application/json"],
        streaming=False,
        push_notifications=True,
        provider=provider,
        documentation_url="https://docs.example.com/agent",
    )
    assert card.default_input_modes == ["text/plain", "image/png"]
    assert card.default_output_modes == ["application/json"]
    assert card.capabilities.streaming is False
    assert card.capabilities.push_notifications is True
    assert card.provider == provider
    assert card.documentation_url == "https://docs.example.com/agent"


def test_skill_helper_leaves_modes_to_the_card_unless_given() -> None:
    plain = skill("a", "A", "does a")
    assert isinstance(plain, AgentSkill)
    assert plain.tags == []
    assert plain.examples is None
    assert plain.input_modes is None
    assert plain.output_modes is None
    full = skill(
        "b",
        "B",
        "does b",
        tags=("x",),
        examples=("go",),
        input_modes=("image/png",),
        output_modes=("application/json",),
    )
    assert full.tags == ["x"]
    assert full.examples == ["go"]
    assert full.input_modes == ["image/png"]
    assert full.output_modes == ["application/json"]


def test_builder_declares_api_key_auth() -> None:
    wire = good_model(AuthSpec.api_key("X-Agent-Key")).model_dump(mode="json", exclude_none=True)
    assert wire["securitySchemes"] == {
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-Agent-Key"}
    }
    assert wire["security"] == [{"apiKey": []}]


def test_builder_declares_bearer_auth() -> None:
    spec = AuthSpec.bearer(bearer_format="JWT", description="OIDC access token")
    wire = good_model(spec).model_dump(mode="json", exclude_none=True)
    assert wire["securitySchemes"] == {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "OIDC access token",
        }
    }
    assert wire["security"] == [{"bearer": []}]


def test_auth_spec_rejects_blank_names() -> None:
    with pytest.raises(ValueError, match="header"):
        AuthSpec.api_key(" ")
    with pytest.raises(ValueError, match="scheme_name"):
        AuthSpec.bearer(scheme_name="")


# --------------------------------------------------------------------------- auth round trip


@pytest.mark.parametrize(
    "spec",
    [
        AuthSpec.api_key(),
        AuthSpec.api_key("X-Token", scheme_name="token", description="issued by ops"),
        AuthSpec.bearer(),
        AuthSpec.bearer(bearer_format="JWT", scheme_name="jwt"),
    ],
    ids=["api_key", "api_key_custom", "bearer", "bearer_jwt"],
)
def test_auth_spec_round_trips_through_the_card(spec: AuthSpec) -> None:
    card = good_model(spec)
    assert auth_spec_from_card(card) == spec
    assert auth_spec_from_card(card.model_dump(mode="json", exclude_none=True)) == spec


def test_auth_spec_from_card_without_auth_is_none() -> None:
    card = good_card()
    del card["securitySchemes"], card["security"]
    assert auth_spec_from_card(card) is None


def test_auth_spec_from_card_uses_declared_scheme_when_security_is_absent() -> None:
    card = good_card()
    del card["security"]
    assert auth_spec_from_card(card) == AuthSpec.api_key()


def test_auth_spec_from_card_takes_first_expressible_alternative() -> None:
    card = good_card()
    card["securitySchemes"] = {
        "mtls": {"type": "mutualTLS"},
        "bearer": {"type": "http", "scheme": "Bearer"},
    }
    card["security"] = [{"mtls": []}, {"bearer": []}]
    assert auth_spec_from_card(card) == AuthSpec.bearer()


_HEADER_KEY = {"type": "apiKey", "in": "header", "name": "A"}


@pytest.mark.parametrize(
    ("schemes", "security"),
    [
        ({"mtls": {"type": "mutualTLS"}}, [{"mtls": []}]),
        ({"q": {"type": "apiKey", "in": "query", "name": "key"}}, [{"q": []}]),
        ({"basic": {"type": "http", "scheme": "basic"}}, None),
        ({"a": _HEADER_KEY, "b": {"type": "http", "scheme": "bearer"}}, [{"a": [], "b": []}]),
        ({}, [{"ghost": []}]),
    ],
    ids=["mtls", "query_key", "basic", "both_required", "undeclared"],
)
def test_auth_spec_from_card_fails_closed_on_auth_it_cannot_express(
    schemes: dict[str, Any], security: list[dict[str, list[str]]] | None
) -> None:
    card = good_card()
    card["securitySchemes"] = schemes
    card["security"] = security
    with pytest.raises(ValueError, match="enforce it yourself"):
        auth_spec_from_card(card)


# --------------------------------------------------------------------------- lint rules


def test_good_card_has_no_findings() -> None:
    assert lint_agent_card(good_model()) == []
    assert lint_agent_card(good_card()) == []
    assert lint_agent_card(good_model(AuthSpec.bearer())) == []


def _set(path: str, value: object) -> Callable[[Card], None]:
    """A mutation setting ``a.b[0].c`` style ``path`` to ``value``."""

    def mutate(card: Card) -> None:
        *parents, last = path.replace("[", ".").replace("]", "").split(".")
        target: Any = card
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value

    return mutate


def _delete(*keys: str) -> Callable[[Card], None]:
    def mutate(card: Card) -> None:
        for key in keys:
            del card[key]

    return mutate


def _delete_examples(card: Card) -> None:
    del card["skills"][0]["examples"]


def _duplicate_skill(card: Card) -> None:
    card["skills"].append(copy.deepcopy(card["skills"][0]))


def _json_skill_without_schema(card: Card) -> None:
    card["skills"][0]["description"] = "Finds the cheapest direct flight between two airports."


RULE_CASES: list[tuple[str, str, str, Callable[[Card], None]]] = [
    ("name_missing", "error", "name", _set("name", "  ")),
    ("description_empty", "error", "description", _set("description", " ")),
    (
        "description_too_short",
        "warning",
        "description",
        _set("description", "Searches flights by route."),
    ),
    (
        "description_vague",
        "warning",
        "description",
        _set("description", "Searches flights, hotels and various other travel options for you."),
    ),
    ("skills_empty", "warning", "skills", _set("skills", [])),
    ("skill_field_missing", "error", "skills[0].name", _set("skills[0].name", "")),
    ("skill_tags_missing", "warning", "skills[0].tags", _set("skills[0].tags", [])),
    ("skill_duplicate_id", "error", "skills[1].id", _duplicate_skill),
    (
        "skill_multiple_tasks",
        "warning",
        "skills[0].name",
        _set("skills[0].name", "Search and book flights"),
    ),
    ("skill_no_examples", "warning", "skills[0].examples", _delete_examples),
    (
        "skill_json_output_undescribed",
        "warning",
        "skills[0].description",
        _json_skill_without_schema,
    ),
    ("modes_missing", "error", "defaultInputModes", _set("defaultInputModes", [])),
    ("mode_not_mime", "error", "defaultOutputModes[0]", _set("defaultOutputModes", ["json"])),
    ("version_not_semver", "error", "version", _set("version", "1.2")),
    ("auth_not_declared", "warning", "securitySchemes", _delete("securitySchemes", "security")),
    ("security_requirement_missing", "warning", "security", _delete("security")),
    (
        "security_scheme_undeclared",
        "error",
        "security[0].oauth",
        _set("security", [{"oauth": ["read"]}]),
    ),
    ("url_not_absolute", "error", "url", _set("url", "/a2a")),
    ("protocol_version_missing", "error", "protocolVersion", _delete("protocolVersion")),
    ("invalid_card", "error", "$", _set("skills", [{"id": "x"}])),
]


@pytest.mark.parametrize(
    ("rule", "severity", "path", "mutate"), RULE_CASES, ids=[case[0] for case in RULE_CASES]
)
def test_each_rule_fires_alone_with_its_id_severity_and_path(
    rule: str, severity: str, path: str, mutate: Callable[[Card], None]
) -> None:
    card = good_card()
    mutate(card)
    findings = lint_agent_card(card)
    assert [(f.rule, f.severity, f.path) for f in findings] == [(rule, severity, path)]
    assert CARD_RULES[rule].severity == severity
    assert findings[0].message


def test_every_rule_is_pinned_and_documented() -> None:
    assert [case[0] for case in RULE_CASES] == [*list(CARD_RULES)[1:], "invalid_card"]
    docs = DOCS.read_text(encoding="utf-8")
    for rule in CARD_RULES.values():
        assert f"`{rule.id}`" in docs, f"docs/agent-card.md does not describe {rule.id}"
        assert rule.severity in ("error", "warning")
        assert rule.advice


def test_invalid_card_names_every_field_path_and_never_raises() -> None:
    card = good_card()
    card["name"] = 5
    del card["defaultInputModes"]
    card["skills"][0] = {"id": "x", "name": "X", "description": "does x"}
    findings = lint_agent_card(card)
    assert len(findings) == 1
    message = findings[0].message
    for path in ("name", "defaultInputModes", "skills[0].tags"):
        assert f"{path}:" in message
    assert lint_agent_card([1, 2]) == [  # type: ignore[arg-type]
        CardFinding("invalid_card", "error", "$", "an AgentCard is a JSON object, got list")
    ]
    assert [f.rule for f in lint_agent_card({})] == ["invalid_card"]


def test_a_bad_description_is_short_and_vague() -> None:
    findings = lint_agent_card({**good_card(), "description": "데이터 관련 작업을 처리합니다"})
    assert [f.rule for f in findings] == ["description_too_short", "description_vague"]
    assert "'관련 작업'" in findings[1].message


def test_long_korean_description_passes() -> None:
    description = (
        "Databricks SQL Warehouse에 연결하여 자연어 질문을 SQL 쿼리로 변환해 실행합니다. "
        "결과는 표 JSON으로 반환합니다."
    )
    assert lint_agent_card({**good_card(), "description": description}) == []


def test_vague_skill_description_is_flagged_at_its_path() -> None:
    card = good_card()
    card["skills"][0]["description"] = "Handles anything about flights; returns JSON."
    assert [(f.rule, f.path) for f in lint_agent_card(card)] == [
        ("description_vague", "skills[0].description")
    ]


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("name", "Search/book flights"),
        ("name", "Search, book flights"),
        ("name", "Flights & hotels"),
        ("name", "항공편 검색 및 예약"),
        ("description", "Searches flights and books the cheapest one; returns JSON."),
        ("description", "Searches flights as well as hotel rooms; returns JSON."),
        ("description", "항공편을 검색하고 예약합니다. JSON을 반환합니다."),
        ("description", "항공편을 검색합니다. 그리고 예약합니다. JSON을 반환합니다."),
        ("description", "항공편 검색 및 예약을 처리합니다. JSON을 반환합니다."),
    ],
)
def test_skill_joining_tasks_is_flagged(field: str, text: str) -> None:
    card = good_card()
    card["skills"][0][field] = text
    assert [(f.rule, f.path) for f in lint_agent_card(card)] == [
        ("skill_multiple_tasks", f"skills[0].{field}")
    ]


@pytest.mark.parametrize(
    "description",
    [
        "출발지, 도착지, 날짜로 항공편을 검색합니다. 결과는 JSON입니다.",
        "Finds flights by origin, destination and date and returns JSON offers.",
        "Converts text/plain itineraries into a JSON schema of legs.",
    ],
)
def test_one_task_descriptions_with_commas_and_lists_pass(description: str) -> None:
    card = good_card()
    card["skills"][0]["description"] = description
    assert lint_agent_card(card) == []


def test_skill_level_modes_and_security_are_checked() -> None:
    card = good_card()
    card["skills"][0]["inputModes"] = []
    card["skills"][0]["outputModes"] = ["application/json", "png"]
    card["skills"][0]["security"] = [{"jwt": []}]
    assert [(f.rule, f.path) for f in lint_agent_card(card)] == [
        ("modes_missing", "skills[0].inputModes"),
        ("mode_not_mime", "skills[0].outputModes[1]"),
        ("security_scheme_undeclared", "skills[0].security[0].jwt"),
    ]


@pytest.mark.parametrize(
    "mode",
    ["text/plain", "application/vnd.api+json", "image/*", "*/*", "text/plain; charset=utf-8"],
)
def test_mime_like_modes_pass(mode: str) -> None:
    assert lint_agent_card({**good_card(), "defaultInputModes": [mode]}) == []


@pytest.mark.parametrize("version", ["1.0.0", "0.3.0-rc.1", "2.10.4+build.7"])
def test_semver_versions_pass(version: str) -> None:
    assert lint_agent_card({**good_card(), "version": version}) == []


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0.0", "01.0.0", "latest"])
def test_non_semver_versions_fail(version: str) -> None:
    assert [f.rule for f in lint_agent_card({**good_card(), "version": version})] == [
        "version_not_semver"
    ]


@pytest.mark.parametrize(
    "url", ["flights.example.com/a2a", "ftp://flights.example.com", "https://"]
)
def test_non_http_urls_fail(url: str) -> None:
    assert [f.rule for f in lint_agent_card({**good_card(), "url": url})] == ["url_not_absolute"]


def test_finding_to_dict() -> None:
    finding = CardFinding("version_not_semver", "error", "version", "bad")
    assert finding.to_dict() == {
        "rule": "version_not_semver",
        "severity": "error",
        "path": "version",
        "message": "bad",
    }


# --------------------------------------------------------------------------- loading: files


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(good_card(), ensure_ascii=False), encoding="utf-8")
    assert load_agent_card(str(path)) == good_card()


@pytest.mark.parametrize(
    ("content", "reason"),
    [(None, "cannot read file"), ("{not json", "invalid JSON"), ("[1]", "got list")],
    ids=["missing", "bad_json", "not_object"],
)
def test_load_file_errors_name_the_source(tmp_path: Path, content: str | None, reason: str) -> None:
    path = tmp_path / "card.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(CardLoadError, match=reason) as caught:
        load_agent_card(str(path))
    assert caught.value.source == str(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, ValueError)


# --------------------------------------------------------------------------- loading: HTTP

Routes = dict[str, tuple[int, bytes]]


class _Handler(BaseHTTPRequestHandler):
    routes: Routes
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        status, body = self.routes.get(self.path, (404, b'{"error": "not found"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class CardServer:
    """A real HTTP server on 127.0.0.1 (port 0) serving whatever ``routes`` holds."""

    def __init__(self) -> None:
        self.routes: Routes = {}
        self.seen: list[str] = []
        handler = type("Handler", (_Handler,), {"routes": self.routes, "seen": self.seen})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self._ready.set()  # the socket already listens; connections queue until served
        self._server.serve_forever(poll_interval=0.01)

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(timeout=5), "card server did not start"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def serve(self, path: str, card: object, status: int = 200) -> None:
        body = card if isinstance(card, bytes) else json.dumps(card).encode()
        self.routes[path] = (status, body)


@pytest.fixture
def server() -> Iterator[CardServer]:
    card_server = CardServer()
    card_server.start()
    try:
        yield card_server
    finally:
        card_server.stop()


def test_load_from_base_url_uses_agent_card_json(server: CardServer) -> None:
    server.serve("/.well-known/agent-card.json", good_card())
    server.serve("/.well-known/agent.json", {"old": True})
    assert load_agent_card(server.base) == good_card()
    assert server.seen == ["/.well-known/agent-card.json"]


def test_load_falls_back_to_older_agent_json(server: CardServer) -> None:
    server.serve("/.well-known/agent.json", good_card())
    assert load_agent_card(server.base + "/") == good_card()
    assert server.seen == ["/.well-known/agent-card.json", "/.well-known/agent.json"]
    assert lint_agent_card(load_agent_card(server.base)) == []


def test_load_from_endpoint_url_falls_back_to_origin(server: CardServer) -> None:
    server.serve("/.well-known/agent.json", good_card())
    assert load_agent_card(server.base + "/a2a") == good_card()
    assert server.seen == [
        "/a2a/.well-known/agent-card.json",
        "/a2a/.well-known/agent.json",
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
    ]


def test_load_explicit_json_url_is_fetched_as_is(server: CardServer) -> None:
    server.serve("/cards/flights.json", good_card())
    assert load_agent_card(server.base + "/cards/flights.json") == good_card()
    assert server.seen == ["/cards/flights.json"]


def test_load_without_any_card_lists_every_attempt(server: CardServer) -> None:
    server.serve("/.well-known/agent-card.json", {"error": "boom"}, status=500)
    with pytest.raises(CardLoadError) as caught:
        load_agent_card(server.base)
    message = str(caught.value)
    assert caught.value.source == server.base
    assert "agent-card.json -> HTTP 500" in message
    assert "agent.json -> HTTP 404" in message


def test_load_bad_json_over_http_names_the_url(server: CardServer) -> None:
    server.serve("/.well-known/agent-card.json", b"<html>not a card</html>")
    with pytest.raises(CardLoadError, match=r"agent-card\.json: invalid JSON"):
        load_agent_card(server.base)


def test_load_connection_refused_is_a_card_load_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = f"http://127.0.0.1:{port}"
    with pytest.raises(CardLoadError, match="failed") as caught:
        load_agent_card(source, timeout=2.0)
    assert source in str(caught.value)

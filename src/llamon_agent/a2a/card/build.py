"""Build an Agent Card: ``build_agent_card``, ``skill``, ``build_extended_card``, ``AuthSpec``.

``build_agent_card(...)`` returns a real ``a2a.types.AgentCard`` (protocol ``0.3.0``,
JSON-RPC transport) with the card-level input/output modes declared explicitly and, when
``auth=AuthSpec.api_key()`` or ``AuthSpec.bearer()`` is given, the scheme in both
``securitySchemes`` and ``security``. ``authenticated_extended_card=True`` (auth required)
declares an extended card, which ``build_extended_card(card, skills=...)`` builds: served
only to authenticated callers. ``auth_spec_from_card(card)`` reads that declaration back,
so a server enforces exactly what its card promises (``None`` means the card requires no
auth; a requirement this module cannot express raises ``ValueError`` rather than silently
allowing everyone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    In,
    SecurityScheme,
    TransportProtocol,
)

__all__ = [
    "PROTOCOL_VERSION",
    "AuthSpec",
    "auth_spec_from_card",
    "build_agent_card",
    "build_extended_card",
    "skill",
]

PROTOCOL_VERSION: Final = "0.3.0"
"""The A2A protocol version ``build_agent_card`` declares (a2a-sdk 0.3)."""


# --------------------------------------------------------------------------- auth


@dataclass(frozen=True, slots=True)
class AuthSpec:
    """How callers authenticate: an API key in a header, or an HTTP bearer token.

    Make one with ``AuthSpec.api_key()`` or ``AuthSpec.bearer()``; ``scheme_name`` is the
    key under ``securitySchemes`` (and in ``security``) of the card. ``kind`` and ``header``
    match ``llamon_agent.a2a.auth.AuthConfig``'s ``scheme`` and ``header``, so a server can
    enforce a card with ``AuthConfig(spec.kind, secrets, spec.header)``.
    """

    kind: Literal["api_key", "bearer"]
    scheme_name: str
    header: str
    bearer_format: str | None = None
    description: str | None = None

    @classmethod
    def api_key(
        cls,
        header: str = "X-API-Key",
        *,
        scheme_name: str = "apiKey",
        description: str | None = None,
    ) -> AuthSpec:
        """An API key sent in request header ``header``."""
        if not header.strip() or not scheme_name.strip():
            raise ValueError("AuthSpec.api_key needs a non-empty header and scheme_name")
        return cls("api_key", scheme_name, header, None, description)

    @classmethod
    def bearer(
        cls,
        *,
        bearer_format: str | None = None,
        scheme_name: str = "bearer",
        description: str | None = None,
    ) -> AuthSpec:
        """A token sent as ``Authorization: Bearer <token>`` (``bearer_format`` e.g. "JWT")."""
        if not scheme_name.strip():
            raise ValueError("AuthSpec.bearer needs a non-empty scheme_name")
        return cls("bearer", scheme_name, "Authorization", bearer_format, description)

    def security_scheme(self) -> SecurityScheme:
        """The OpenAPI-style scheme the card declares under ``securitySchemes``."""
        if self.kind == "api_key":
            return SecurityScheme(
                root=APIKeySecurityScheme(
                    in_=In.header, name=self.header, description=self.description
                )
            )
        return SecurityScheme(
            root=HTTPAuthSecurityScheme(
                scheme="bearer", bearer_format=self.bearer_format, description=self.description
            )
        )

    def security_requirement(self) -> dict[str, list[str]]:
        """The entry the card lists under ``security``: ``{scheme_name: []}``."""
        return {self.scheme_name: []}


def _spec_from_scheme(name: str, scheme: SecurityScheme) -> AuthSpec | None:
    root = scheme.root
    if isinstance(root, APIKeySecurityScheme) and root.in_ == In.header:
        return AuthSpec("api_key", name, root.name, None, root.description)
    if isinstance(root, HTTPAuthSecurityScheme) and root.scheme.lower() == "bearer":
        return AuthSpec("bearer", name, "Authorization", root.bearer_format, root.description)
    return None


def _requirements(card: AgentCard) -> list[dict[str, list[str]]]:
    if card.security:
        return card.security
    return [{name: []} for name in card.security_schemes or {}]


def auth_spec_from_card(card: AgentCard | Mapping[str, Any]) -> AuthSpec | None:
    """The auth a server should enforce for ``card``; ``None`` when it requires none.

    ``security`` is an OR of alternatives; the first alternative that is a single header
    API key or bearer scheme wins. When ``security`` is absent, each declared scheme is
    one alternative. A mapping that is not a valid card raises pydantic's
    ``ValidationError``. If auth is required but no alternative can be expressed as an
    ``AuthSpec`` (OAuth2, mTLS, a query-string key ...), ``ValueError`` says so: failing
    closed is safer than serving a card that promises auth the server does not check.
    """
    model = card if isinstance(card, AgentCard) else AgentCard.model_validate(card)
    requirements = _requirements(model)
    if not requirements:
        return None
    schemes = model.security_schemes or {}
    for requirement in requirements:
        if len(requirement) == 1:
            (name,) = requirement
            declared = schemes.get(name)
            spec = _spec_from_scheme(name, declared) if declared is not None else None
            if spec is not None:
                return spec
    raise ValueError(
        f"card requires auth {requirements!r} but none of its alternatives is a single "
        "header API key or bearer scheme; enforce it yourself"
    )


# --------------------------------------------------------------------------- builder


def skill(
    id: str,
    name: str,
    description: str,
    *,
    tags: Sequence[str] = (),
    examples: Sequence[str] = (),
    input_modes: Sequence[str] | None = None,
    output_modes: Sequence[str] | None = None,
) -> AgentSkill:
    """One ``AgentSkill``: one task a client's LLM can pick this agent for.

    ``input_modes``/``output_modes`` left ``None`` inherit the card's defaults.
    """
    return AgentSkill(
        id=id,
        name=name,
        description=description,
        tags=list(tags),
        examples=list(examples) or None,
        input_modes=None if input_modes is None else list(input_modes),
        output_modes=None if output_modes is None else list(output_modes),
    )


def build_agent_card(
    *,
    name: str,
    description: str,
    url: str,
    version: str,
    skills: Sequence[AgentSkill],
    input_modes: Sequence[str] = ("text/plain",),
    output_modes: Sequence[str] = ("text/plain", "application/json"),
    streaming: bool = True,
    push_notifications: bool = False,
    auth: AuthSpec | None = None,
    provider: AgentProvider | None = None,
    documentation_url: str | None = None,
    authenticated_extended_card: bool = False,
) -> AgentCard:
    """An A2A 0.3 ``AgentCard`` served over JSON-RPC at ``url``.

    ``authenticated_extended_card=True`` declares ``supportsAuthenticatedExtendedCard``:
    authenticated callers get a fuller card (``build_extended_card``) from
    ``agent/getAuthenticatedExtendedCard``; it needs ``auth`` (``ValueError`` otherwise).
    Nothing else is checked here beyond the SDK's own model validation; run
    ``lint_agent_card`` (or ``llamon card lint``) on the result.
    """
    if authenticated_extended_card and auth is None:
        raise ValueError(
            "an authenticated extended card is served only to authenticated callers: "
            "pass auth=AuthSpec.api_key() or AuthSpec.bearer() too"
        )
    return AgentCard(
        name=name,
        description=description,
        url=url,
        version=version,
        protocol_version=PROTOCOL_VERSION,
        preferred_transport=TransportProtocol.jsonrpc.value,
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push_notifications),
        default_input_modes=list(input_modes),
        default_output_modes=list(output_modes),
        skills=list(skills),
        security_schemes=None if auth is None else {auth.scheme_name: auth.security_scheme()},
        security=None if auth is None else [auth.security_requirement()],
        provider=provider,
        documentation_url=documentation_url,
        supports_authenticated_extended_card=authenticated_extended_card or None,
    )


def build_extended_card(
    card: AgentCard,
    *,
    skills: Sequence[AgentSkill] = (),
    description: str | None = None,
) -> AgentCard:
    """The authenticated extended card of ``card``: the same card plus ``skills`` (and
    ``description`` if given). Serve it with ``create_app(..., extended_card=...)``; the
    public ``card`` must declare it (``build_agent_card(authenticated_extended_card=True)``).
    """
    return card.model_copy(
        update={
            "skills": [*card.skills, *skills],
            "description": card.description if description is None else description,
        },
        deep=True,
    )


# --------------------------------------------------------------------------- lint rules

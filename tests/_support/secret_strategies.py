"""Hypothesis strategies for secrets and innocent evidence, shared by the scrubber's tests.

``secret_samples()`` yields realistic secrets (random characters, real-world shapes) embedded
in realistic snippets; ``innocent_evidence()`` yields operational evidence dicts that the
scrubber must pass through unchanged.
"""

from __future__ import annotations

import base64
import string
from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = ["SECRET_KINDS", "SecretSample", "innocent_evidence", "secret_samples"]

SECRET_KINDS = (
    "bearer",
    "jwt",
    "api_key",
    "cookie",
    "password",
    "url_userinfo",
    "email",
    "phone",
    "user_id",
)

_LOWER = string.ascii_lowercase
_UPPER = string.ascii_uppercase
_DIGITS = string.digits
_ALNUM = string.ascii_letters + string.digits
_B64URL = _ALNUM + "-_"
_TOKEN68 = _ALNUM + "-._~+/"
# Printable password characters that survive unquoted in "key=value" text: no whitespace,
# quotes, backslash or the value terminators & , ; (a password containing those cannot be
# told apart from the text around it).
_PASSWORD_CHARS = _ALNUM + "!#$%^*()-_+.~@:=[]{}|/?<>"
_URL_PASSWORD_CHARS = _ALNUM + "-._~!$*+=%"


@dataclass(frozen=True)
class SecretSample:
    """One secret: ``value`` must never appear in scrubbed output; ``text`` embeds it."""

    kind: str
    value: str
    text: str


def _chars(alphabet: str, min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size)


def _embed(
    kind: str, values: st.SearchStrategy[str], templates: tuple[str, ...]
) -> st.SearchStrategy[SecretSample]:
    return st.builds(
        lambda value, template: SecretSample(kind, value, template.format(v=value)),
        values,
        st.sampled_from(templates),
    )


# -- bearer / basic ---------------------------------------------------------------------

_BEARER_TEMPLATES = (
    "Authorization: Bearer {v}",
    "authorization: bearer {v}",
    '{{"Authorization": "Bearer {v}"}}',
    "headers={{'authorization': 'Bearer {v}'}}",
    "upstream rejected Bearer {v} with 401",
    "Proxy-Authorization: Bearer {v}",
    "Authorization: Token {v}",
    "Authorization: {v}",
)


def _basic_credentials() -> st.SearchStrategy[str]:
    return st.builds(
        lambda user, password: base64.b64encode(f"{user}:{password}".encode()).decode(),
        _chars(_ALNUM, 3, 12),
        _chars(_PASSWORD_CHARS, 8, 24),
    )


def _bearer() -> st.SearchStrategy[SecretSample]:
    tokens = st.builds(
        lambda body, pad: body + pad, _chars(_TOKEN68, 20, 80), st.sampled_from(["", "=", "=="])
    )
    basic = _embed(
        "bearer",
        _basic_credentials(),
        ("Authorization: Basic {v}", "sent Basic {v} to the proxy", "'authorization': 'Basic {v}'"),
    )
    return _embed("bearer", tokens, _BEARER_TEMPLATES) | basic


# -- JWT ------------------------------------------------------------------------------


def _jwt_values() -> st.SearchStrategy[str]:
    return st.builds(
        lambda header, payload, signature: f"eyJ{header}.eyJ{payload}.{signature}",
        _chars(_B64URL, 10, 60),
        _chars(_B64URL, 10, 200),
        _chars(_B64URL, 16, 86),
    )


_JWT_TEMPLATES = (
    "token={v}",
    "Authorization: Bearer {v}",
    '{{"id_token": "{v}"}}',
    "jwt {v} rejected: signature mismatch",
    "decode failed for {v}",
    "?access_token={v}&expires_in=3600",
)


# -- API keys -------------------------------------------------------------------------


def _api_key_values() -> st.SearchStrategy[str]:
    def prefixed(
        prefix: str, alphabet: str, min_size: int, max_size: int
    ) -> st.SearchStrategy[str]:
        return _chars(alphabet, min_size, max_size).map(lambda body: prefix + body)

    slack = st.builds(
        lambda kind, team, user, body: f"xox{kind}-{team}-{user}-{body}",
        st.sampled_from("abpors"),
        _chars(_DIGITS, 10, 13),
        _chars(_DIGITS, 10, 13),
        _chars(_ALNUM, 24, 32),
    )
    return st.one_of(
        prefixed("sk-", _B64URL, 32, 64),
        prefixed("sk-proj-", _B64URL, 40, 80),
        prefixed("sk-ant-api03-", _B64URL, 40, 95),
        prefixed("AKIA", _UPPER + _DIGITS, 16, 16),
        prefixed("ASIA", _UPPER + _DIGITS, 16, 16),
        st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]).flatmap(
            lambda prefix: prefixed(prefix, _ALNUM, 36, 36)
        ),
        prefixed("github_pat_", _ALNUM + "_", 22, 82),
        slack,
        prefixed("AIza", _B64URL, 35, 35),
        st.sampled_from(["sk_live_", "pk_live_", "rk_live_", "sk_test_"]).flatmap(
            lambda prefix: prefixed(prefix, _ALNUM, 24, 99)
        ),
    )


_API_KEY_TEMPLATES = (
    "{v}",
    "OPENAI_API_KEY={v}",
    "api_key: {v}",
    "x-api-key: {v}",
    "invalid key {v} provided",
    "GET /v1/models?key={v}&alt=json",
    '{{"apiKey": "{v}"}}',
)


# -- cookies / sessions ---------------------------------------------------------------

_COOKIE_TEMPLATES = (
    "Cookie: session={v}; theme=dark",
    "Set-Cookie: sid={v}; Path=/; HttpOnly; Secure",
    "cookie={v}",
    '{{"set-cookie": "sessionid={v}; Secure"}}',
    "session_id={v}",
    "request had Cookie: _ga=GA1.2.3; connect.sid={v}",
)


# -- passwords ------------------------------------------------------------------------

_PASSWORD_TEMPLATES = (
    "password={v}",
    '{{"password": "{v}"}}',
    "DB_PASSWORD='{v}'",
    "client_secret: {v}",
    "{{'passwd': '{v}'}}",
    "login?user=bob&pwd={v}&next=/home",
    "--password {v}",
    'secret = "{v}"',
    "auth failed: dbPassword={v}",
    "privateKey => '{v}'",
)


# -- URL user-info --------------------------------------------------------------------


def _url_userinfo() -> st.SearchStrategy[SecretSample]:
    return st.builds(
        lambda scheme, user, password, host, port, template: SecretSample(
            "url_userinfo",
            password,
            template.format(url=f"{scheme}://{user}:{password}@{host}:{port}/app"),
        ),
        st.sampled_from(
            ["postgres", "postgresql", "mysql", "redis", "amqp", "mongodb+srv", "https"]
        ),
        _chars(_ALNUM, 0, 12),
        _chars(_URL_PASSWORD_CHARS, 8, 32),
        st.sampled_from(["db.internal", "localhost", "10.0.0.12", "cache-1.prod.example.com"]),
        st.integers(1, 65535),
        st.sampled_from(["{url}", "connecting to {url} failed", "dsn={url}", "('{url}',)"]),
    )


# -- e-mail ---------------------------------------------------------------------------


def _email_values() -> st.SearchStrategy[str]:
    local = st.builds(
        lambda first, rest: first + rest,
        st.sampled_from(_LOWER + _DIGITS),
        _chars(_LOWER + _DIGITS + "._+-", 0, 20),
    )
    label = _chars(_LOWER + _DIGITS, 1, 12)
    domain = st.builds(
        lambda labels, tld: ".".join([*labels, tld]),
        st.lists(label, min_size=1, max_size=3),
        _chars(_LOWER, 2, 6),
    )
    return st.builds(lambda local_part, host: f"{local_part}@{host}", local, domain)


_EMAIL_TEMPLATES = (
    "contact {v} for access",
    "email={v}",
    '{{"e-mail": "{v}"}}',
    "From: Kim <{v}>",
    "mailto:{v}",
    "lookup failed for {v}.",
)


# -- phone numbers --------------------------------------------------------------------


def _e164() -> st.SearchStrategy[str]:
    def render(country: str, rest: str, sizes: list[int], sep: str) -> str:
        groups: list[str] = []
        index = 0
        for size in sizes:
            if index >= len(rest):
                break
            groups.append(rest[index : index + size])
            index += size
        if index < len(rest):
            groups.append(rest[index:])
        return "+" + country + sep + sep.join(groups)

    return st.builds(
        render,
        st.builds(
            lambda first, more: first + more, st.sampled_from("123456789"), _chars(_DIGITS, 0, 2)
        ),
        _chars(_DIGITS, 8, 12),
        st.lists(st.integers(1, 4), min_size=1, max_size=5),
        st.sampled_from(["", " ", "-", "."]),
    ).filter(lambda phone: 8 <= sum(c.isdigit() for c in phone) <= 15)


def _phone_values() -> st.SearchStrategy[str]:
    def digits(n: int) -> st.SearchStrategy[str]:
        return _chars(_DIGITS, n, n)

    korean = st.builds(
        lambda prefix, middle, last, sep: f"{prefix}{sep}{middle}{sep}{last}",
        st.sampled_from(["010", "011", "016", "017", "018", "019"]),
        st.one_of(digits(3), digits(4)),
        digits(4),
        st.sampled_from(["-", "", " "]),
    )
    area = st.builds(lambda first, rest: first + rest, st.sampled_from("23456789"), digits(2))
    north_american = st.builds(
        lambda a, b, c, style: style.format(a=a, b=b, c=c),
        area,
        digits(3),
        digits(4),
        st.sampled_from(
            ["({a}) {b}-{c}", "{a}-{b}-{c}", "{a}.{b}.{c}", "+1 ({a}) {b}-{c}", "1-{a}-{b}-{c}"]
        ),
    )
    return st.one_of(_e164(), korean, north_american)


_PHONE_TEMPLATES = (
    "call me at {v}",
    "phone={v}",
    '{{"mobile": "{v}"}}',
    "tel:{v}",
    "SMS to {v} failed",
    "contact ({v})",
)


# -- user ids -------------------------------------------------------------------------


def _user_id_values() -> st.SearchStrategy[str]:
    return st.one_of(
        _chars(_ALNUM, 8, 16).map(lambda body: "u-" + body),
        _chars(_ALNUM, 8, 16).map(lambda body: "usr_" + body),
        _chars(_ALNUM, 14, 14).map(lambda body: "cus_" + body),
        st.builds(
            lambda first, rest: first + rest, st.sampled_from("123456789"), _chars(_DIGITS, 7, 11)
        ),
    )


_USER_ID_TEMPLATES = (
    "user_id={v}",
    '{{"userId": "{v}"}}',
    "customer_id: {v}",
    "account_id='{v}'",
    "member_id={v}",
    "username={v}",
    "uid={v}",
    "--user {v}",
    "GET /orders?user_id={v}&limit=10",
)


def _only_where_embedded(sample: SecretSample) -> bool:
    """No 8-character piece of the secret is also part of the snippet around it (a URL
    password ``internal`` beside the host ``db.internal``): the host would show it, and
    a test could not tell our fixed text from a leak."""
    value = sample.value
    if sample.text.count(value) != 1:
        return False
    rest = sample.text.replace(value, "\0")
    window = min(8, len(value))
    return all(value[i : i + window] not in rest for i in range(len(value) - window + 1))


def secret_samples() -> st.SearchStrategy[SecretSample]:
    """Every kind of secret, each embedded in one of several realistic snippets."""
    return st.one_of(
        _bearer(),
        _embed("jwt", _jwt_values(), _JWT_TEMPLATES),
        _embed("api_key", _api_key_values(), _API_KEY_TEMPLATES),
        _embed("cookie", _chars(_B64URL, 20, 64), _COOKIE_TEMPLATES),
        _embed("password", _chars(_PASSWORD_CHARS, 8, 32), _PASSWORD_TEMPLATES),
        _url_userinfo(),
        _embed("email", _email_values(), _EMAIL_TEMPLATES),
        _embed("phone", _phone_values(), _PHONE_TEMPLATES),
        _embed("user_id", _user_id_values(), _USER_ID_TEMPLATES),
    ).filter(_only_where_embedded)


# -- innocent evidence ----------------------------------------------------------------

_identifier = st.from_regex(r"[a-z][a-zA-Z_]{0,24}", fullmatch=True)
_snake = st.from_regex(r"[a-z]{2,10}(_[a-z]{2,10}){0,3}", fullmatch=True)


def innocent_evidence() -> st.SearchStrategy[dict[str, object]]:
    """Operational evidence (counts, statuses, names, keyed hashes) that must survive."""
    hex16 = _chars("0123456789abcdef", 16, 16)
    version = st.builds(
        lambda major, minor, patch: f"{major}.{minor}.{patch}",
        st.integers(0, 9),
        st.integers(0, 99),
        st.integers(0, 999),
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "input_tokens": st.integers(0, 10**6),
            "output_tokens": st.integers(0, 10**6),
            "session_id_hash": hex16,
            "user_id_hash": hex16,
            "api_key_present": st.booleans(),
            "http_status": st.integers(100, 599),
            "status_code": st.integers(100, 599),
            "field_name": _identifier,
            "field_path": st.lists(_identifier, min_size=1, max_size=4).map(".".join),
            "missing_fields": st.lists(_identifier, max_size=4),
            "tool_name": _snake,
            "candidate_names": st.lists(_snake, max_size=5),
            "elapsed_ms": st.integers(0, 10**7) | st.floats(0, 1e7, allow_nan=False),
            "retry_after_ms": st.integers(0, 60_000),
            "timeout_s": st.floats(0, 600, allow_nan=False),
            "attempt": st.integers(0, 10),
            "retried": st.booleans(),
            "top_k": st.integers(1, 50),
            "score": st.floats(0, 1, allow_nan=False),
            "status": st.sampled_from(["completed", "failed", "input-required", "working"]),
            "method": st.sampled_from(["GET", "POST", "tools/call", "message/send"]),
            "error_type": st.sampled_from(["TimeoutError", "ValidationError", "HTTPStatusError"]),
            "graph_version": version,
            "content_type": st.sampled_from(["application/json", "text/plain; charset=utf-8"]),
            "incident_id": hex16.map(lambda h: h[:12]),
            "task_id": st.uuids().map(str),
            "url_path": st.lists(_snake, min_size=1, max_size=4).map(
                lambda parts: "/" + "/".join(parts)
            ),
            "node_kind": st.sampled_from(["tool", "llm", "router"]),
            "trace_metadata": st.fixed_dictionaries(
                {},
                optional={
                    "node_id": _snake,
                    "round": st.integers(0, 20),
                    "input_tokens": st.integers(0, 999),
                },
            ),
        },
    )

"""The security boundary: every message and evidence dict the SDK emits passes through here.

What a caller sees:

* :func:`scrub_text` returns the text with credentials and personal data replaced by
  kind-tagged markers such as ``[REDACTED:token]``, ``[REDACTED:email]`` or
  ``[REDACTED:phone]`` (URL user-info becomes plain ``[REDACTED]``), truncated to
  ``max_length`` characters plus ``"…[truncated]"``.
* :func:`scrub_evidence` returns a new dict built by an allow-list: credentials become
  ``{key}_present`` booleans, identities become ``{key}_hash`` keyed hashes, allowed
  operational keys keep their values (scrubbed, and without upstream locations: evidence
  feeds failure records and events), and everything else is dropped and named under
  ``dropped_keys``.
* :func:`scrub_public_text` is :func:`scrub_text` for text that leaves the process (an
  error message a client, a model or an event consumer reads): it also removes every
  upstream location -- URLs become ``[REDACTED:url]``; ``host:port`` pairs, IPv4
  addresses, socket addresses (``('127.0.0.1', 5432)``) and host names
  ``[REDACTED:host]``; ``port 5432`` ``port [REDACTED:port]`` (:func:`strip_locations`).
* :func:`scrub_log_text` is the same for a log line: its traceback frames keep their
  dotted names (``self.app(scope)``), every other line loses its locations as above.
* :func:`keyed_hash` returns a 16-hex-char HMAC-SHA256 digest, so two records about the same
  user or session can be correlated without storing the raw identifier.

Nothing here raises at response time: a scrubber failure yields a marker
(``[REDACTED:scrub_failed]`` / ``{"scrub_failed": True}``) rather than the raw data.
"""

from __future__ import annotations

import base64
import datetime as _dt
import enum
import functools
import hashlib
import hmac
import re
import secrets
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

from llamon_agent.core.settings import scrub_key_setting

__all__ = [
    "REDACTED",
    "allow_evidence_keys",
    "keyed_hash",
    "scrub_evidence",
    "scrub_forwarded",
    "scrub_log_text",
    "scrub_public_text",
    "scrub_text",
    "scrub_value",
    "set_hash_key",
    "strip_locations",
]

REDACTED: Final = "[REDACTED]"
"""The plain redaction marker; text replacements add the kind, e.g. ``[REDACTED:email]``."""

_TRUNCATED: Final = "…[truncated]"
_SCRUB_FAILED_TEXT: Final = "[REDACTED:scrub_failed]"
_EVIDENCE_TEXT_LIMIT: Final = 500
_MAX_ITEMS: Final = 50
_MAX_DEPTH: Final = 5
_DEPTH_LIMIT: Final = "[depth-limit]"


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# --------------------------------------------------------------------------------------
# Text patterns (compiled once; every pattern is anchored by a look-behind or a literal so
# that scanning stays linear in the input length).
# --------------------------------------------------------------------------------------

_PEM_SPACE: Final = r"(?:[ +]|%20)"
_PEM_LABEL: Final = (
    rf"(?:[A-Z0-9 +]|%20){{0,40}}PRIVATE{_PEM_SPACE}KEY(?:{_PEM_SPACE}BLOCK)?[ \t]*-{{3,}}"
)
# A whole block (to its END line, or to the end of the text when it was cut), or the tail
# of one whose BEGIN line is not in this text: its base64 lines and the END line.
_PRIVATE_KEY_RE: Final = re.compile(
    rf"-{{3,}}[ \t]*BEGIN{_PEM_LABEL}.*?(?:-{{3,}}[ \t]*END{_PEM_LABEL}|\Z)"
    rf"|(?:[A-Za-z0-9+/=]{{4,}}[ \t]*(?:\\[rn]|\r?\n))*-{{3,}}[ \t]*END{_PEM_LABEL}",
    re.DOTALL,
)

# scheme://user:pass@host -> scheme://[REDACTED]@host (the user part is an identity too).
_URL_USERINFO_RE: Final = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,30}://)[^\s/?#\[\]]{1,256}@"
)

_JWT_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{2,}(?:\.[A-Za-z0-9_\-]{2,}){1,3}\.[A-Za-z0-9_\-]*"
)

_API_KEY_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-...)
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe
    r"|whsec_[A-Za-z0-9]{20,}"
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|npm_[A-Za-z0-9]{30,}"
    r")"
)

# "Bearer <token>" / "Basic <b64>" anywhere (the Authorization header itself is handled by
# the key/value pass, which also knows the other schemes).
_BEARER_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])(?P<scheme>bearer|basic)(?P<sp>[ \t]+)"
    r"(?P<value>[A-Za-z0-9\-._~+/]+=*)",
    re.IGNORECASE,
)
_PLAIN_WORD_RE: Final = re.compile(r"[A-Z]?[a-z]{1,15}")
_KEY_SEPARATOR_RE: Final = re.compile(r"[ \t]*[:=]")

_EMAIL_RE: Final = re.compile(
    r"[A-Za-z0-9._%+\-]{1,64}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}"
)

# Long runs of token characters; only those that look random are redacted (see
# _looks_random).  "=" is only allowed as trailing padding so "key=value" splits.
_ENTROPY_RE: Final = re.compile(r"(?<![A-Za-z0-9_\-+/])[A-Za-z0-9_\-+/]{32,}={0,3}")
_UUID_LENGTH: Final = 36
_UUID_RE: Final = re.compile(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
)
_INCIDENT_ID_LENGTH: Final = 12
_INCIDENT_ID_RE: Final = re.compile(r"[a-f0-9]{12}")
"""An incident id as the server makes it and the ``incidentId`` of error data requires."""
_INCIDENT_MESSAGE_RE: Final = re.compile(r"Internal error \(incident [a-f0-9]{12}\)\.")
_INCIDENT_MESSAGE_LENGTH: Final = len("Internal error (incident 000000000000).")

_ENTROPY_MIN_LENGTH: Final = 32
_ENTROPY_MIN_TRANSITIONS: Final = 6

_PHONE_RE: Final = re.compile(
    r"(?=[+(0-9])(?<![A-Za-z0-9+])(?:"
    r"\+[1-9](?:[ .\-()]{0,2}[0-9]){7,14}"  # E.164: + and 8-15 digits
    r"|01[016789][ .\-]?[0-9]{3,4}[ .\-]?[0-9]{4}"  # Korean mobile
    r"|(?:1[ .\-])?\([0-9]{3}\)[ .\-]?[0-9]{3}[ .\-][0-9]{4}"  # (555) 123-4567
    r"|(?:1[ .\-])?[0-9]{3}(?P<sep>[.\-])[0-9]{3}(?P=sep)[0-9]{4}"  # 555-123-4567
    r")(?![A-Za-z0-9])"
)

# key=value / key: value / "key": "value" / key => value.  The value is parsed by hand.
_KV_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,63}+)"
    r"(?P<kq>(?:\\{1,4})?[\"']?)(?P<sep>[ \t]*+(?:=>|:=|[:=])[ \t]*+)"
)
_ESCAPED_QUOTE_RE: Final = re.compile(r"\\{1,4}[\"']")
_UNQUOTED_VALUE_RE: Final = re.compile(r"[^\s&,;\"'`]+")
_DQ_BODY_RE: Final = re.compile(r"(?:[^\"\\\r\n]|\\.)*")
_SQ_BODY_RE: Final = re.compile(r"(?:[^'\\\r\n]|\\.)*")
_EOL_RE: Final = re.compile(r"[^\r\n]*")
_AUTH_SCHEME_RE: Final = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9\-]{0,20})[ \t]+")
_AUTH_CRED_RE: Final = re.compile(r"[^\s\"'`,;&]+")
_MARKER_RE: Final = re.compile(r"\[REDACTED(?::[a-z_]+)?\]")

# --password value / -user value (the value is a look-ahead so that "-v --password x" works).
_CLI_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])--?(?P<key>[A-Za-z][A-Za-z0-9_\-]{0,63})[ \t]+"
    r"(?=(?P<value>\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s\"'`]+))"
)

_CAMEL_RE: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WHITESPACE_RE: Final = re.compile(r"\s")

_AUTH_SCHEMES: Final = frozenset(
    {
        "aws4-hmac-sha256",
        "basic",
        "bearer",
        "digest",
        "dpop",
        "hmac",
        "hmac-sha256",
        "hoba",
        "jwt",
        "key",
        "mac",
        "mutual",
        "negotiate",
        "ntlm",
        "oauth",
        "scram-sha-1",
        "scram-sha-256",
        "sso",
        "token",
        "apikey",
        "api-key",
        "vapid",
    }
)

# Key vocabulary for free text.  Keys are split into lower-case components (snake, kebab,
# dotted and camelCase all work) and judged by their last one or two components.
_TEXT_SECRET_LAST: Final = {
    "auth": "token",
    "bearer": "token",
    "cookie": "cookie",
    "cookies": "cookie",
    "credential": "secret",
    "credentials": "secret",
    "jwt": "token",
    "passphrase": "password",
    "passwd": "password",
    "password": "password",
    "pwd": "password",
    "secret": "secret",
    "session": "session",
    "sid": "session",
    "sig": "secret",
    "signature": "secret",
    "token": "token",
    "apikey": "api_key",
    "otp": "secret",
}
_TEXT_SECRET_SQUASHED: Final = (
    ("password", "password"),
    ("passwd", "password"),
    ("passphrase", "password"),
    ("token", "token"),
    ("secret", "secret"),
    ("cookie", "cookie"),
    ("credential", "secret"),
    ("credentials", "secret"),
    ("apikey", "api_key"),
    ("accesskey", "api_key"),
    ("secretkey", "api_key"),
    ("privatekey", "secret"),
    ("sessionid", "session"),
)
_TEXT_SECRET_PAIRS: Final = {
    ("api", "key"): "api_key",
    ("access", "key"): "api_key",
    ("secret", "key"): "api_key",
    ("private", "key"): "secret",
    ("session", "id"): "session",
    ("auth", "code"): "secret",
    ("input", "value"): "input",  # pydantic's "input_value='...'": a request's or upstream's data
}
_TEXT_IDENTITY_LAST: Final = {
    "user": "user_id",
    "username": "user_id",
    "userid": "user_id",
    "uid": "user_id",
    "customerid": "user_id",
    "accountid": "user_id",
    "memberid": "user_id",
    "email": "email",
    "emailaddress": "email",
    "phone": "phone",
    "phonenumber": "phone",
    "mobile": "phone",
    "msisdn": "phone",
}
_TEXT_IDENTITY_PAIRS: Final = {
    ("user", "id"): "user_id",
    ("user", "name"): "user_id",
    ("customer", "id"): "user_id",
    ("account", "id"): "user_id",
    ("member", "id"): "user_id",
    ("e", "mail"): "email",
    ("email", "address"): "email",
    ("phone", "number"): "phone",
    ("mobile", "number"): "phone",
}
# Only secret inside a URL query string (``?code=...&key=...``).
_TEXT_QUERY_ONLY: Final = frozenset({"code", "key"})


def _components(key: str) -> list[str]:
    return [part for part in re.split(r"[_\-.]+", _CAMEL_RE.sub("_", key).lower()) if part]


@lru_cache(maxsize=1024)
def _text_key_kind(key: str, in_query: bool) -> str | None:
    """The redaction kind for the value of ``key`` in free text, or None to keep it."""
    parts = _components(key)
    if not parts:
        return None
    last = parts[-1]
    pair = (parts[-2], last) if len(parts) > 1 else None
    if last.endswith("authorization"):
        return "authorization"
    if pair is not None and pair in _TEXT_SECRET_PAIRS:
        return _TEXT_SECRET_PAIRS[pair]
    if last in _TEXT_SECRET_LAST:
        return _TEXT_SECRET_LAST[last]
    for suffix, kind in _TEXT_SECRET_SQUASHED:
        if last.endswith(suffix):
            return kind
    if pair is not None and pair in _TEXT_IDENTITY_PAIRS:
        return _TEXT_IDENTITY_PAIRS[pair]
    if last in _TEXT_IDENTITY_LAST:
        return _TEXT_IDENTITY_LAST[last]
    if in_query and len(parts) == 1 and last in _TEXT_QUERY_ONLY:
        return "secret"
    return None


def _bearer_repl(match: re.Match[str]) -> str:
    value = match.group("value")
    if len(value) < 8 or _PLAIN_WORD_RE.fullmatch(value):
        return match.group(0)  # "Bearer token expired", "Basic auth failed"
    if _KEY_SEPARATOR_RE.match(match.string, match.end()) and _text_key_kind(value, False):
        return match.group(0)  # "basic client_secret: ..." -- the key/value pass handles it
    return f"{match.group('scheme')}{match.group('sp')}{_marker('token')}"


def _char_class(char: str) -> int:
    if "a" <= char <= "z":
        return 1
    if "A" <= char <= "Z":
        return 2
    if "0" <= char <= "9":
        return 3
    return 0


def _looks_random(run: str) -> bool:
    """True for runs that look like generated secrets rather than words, paths or UUIDs."""
    core = run.rstrip("=")
    if _UUID_RE.search(core):
        # UUIDs are correlation ids (task_id, context_id, incident ids): keep them, but
        # still judge whatever surrounds them.
        return any(
            len(piece) >= _ENTROPY_MIN_LENGTH and _looks_random(piece)
            for piece in _UUID_RE.split(core)
        )
    has_letter = has_digit = False
    transitions = 0
    previous = 0
    for char in core:
        current = _char_class(char)
        if current == 3:
            has_digit = True
        elif current:
            has_letter = True
        if current and previous and current != previous:
            transitions += 1
        previous = current
    return (
        has_letter
        and has_digit
        and transitions >= _ENTROPY_MIN_TRANSITIONS
        and transitions * 4 >= len(core)
    )


def _entropy_repl(match: re.Match[str]) -> str:
    run = match.group(0)
    return _marker("secret") if _looks_random(run) else run


def _is_marker(text: str) -> bool:
    return _MARKER_RE.fullmatch(text) is not None or text == REDACTED


def _line_end(text: str, pos: int) -> int:
    match = _EOL_RE.match(text, pos)
    return match.end() if match else pos


def _value_span(text: str, pos: int) -> tuple[int, int, bool] | None:
    """Where the value starting at ``pos`` lies: (start, end, quoted); None when empty."""
    escaped = _ESCAPED_QUOTE_RE.match(text, pos) if text.startswith("\\", pos) else None
    if escaped is not None:
        quote = escaped.group(0)
        start = escaped.end()
        eol = _line_end(text, start)
        close = text.find(quote, start, eol)
        return start, close if close >= 0 else eol, True
    if pos < len(text) and text[pos] in "\"'":
        body = _DQ_BODY_RE if text[pos] == '"' else _SQ_BODY_RE
        start = pos + 1
        match = body.match(text, start)
        return start, match.end() if match else start, True
    match = _UNQUOTED_VALUE_RE.match(text, pos)
    if match is None:
        return None
    return match.start(), match.end(), False


def _redact_key_values(text: str) -> str:
    pieces: list[str] = []
    cursor = 0
    for match in _KV_RE.finditer(text):
        start = match.start()
        if match.end() < cursor:
            continue  # inside a value that was already redacted
        in_query = start > 0 and text[start - 1] in "?&"
        kind = _text_key_kind(match.group("key"), in_query)
        if kind is None:
            continue
        pos = match.end()
        if kind == "cookie" and not match.group("kq") and ":" in match.group("sep"):
            # Cookie / Set-Cookie header: everything to the end of the line.
            span: tuple[int, int, bool] | None = (pos, _line_end(text, pos), False)
        else:
            span = _value_span(text, pos)
        if span is None:
            continue
        value_start, value_end, quoted = span
        if kind == "authorization":
            kind = "token"
            scheme = _AUTH_SCHEME_RE.match(text, value_start, value_end if quoted else len(text))
            if scheme and scheme.group("scheme").lower() in _AUTH_SCHEMES:
                value_start = scheme.end()
                if not quoted:
                    cred = _AUTH_CRED_RE.match(text, value_start)
                    value_end = cred.end() if cred else value_start
        value = text[value_start:value_end]
        if value_start < cursor or not value or _is_marker(value):
            continue
        pieces.append(text[cursor:value_start])
        pieces.append(_marker(kind))
        cursor = value_end
    if not pieces:
        return text
    pieces.append(text[cursor:])
    return "".join(pieces)


def _redact_cli_flags(text: str) -> str:
    pieces: list[str] = []
    cursor = 0
    for match in _CLI_RE.finditer(text):
        value_start, value_end = match.span("value")
        if value_start < cursor:
            continue
        kind = _text_key_kind(match.group("key"), False)
        value = match.group("value")
        if kind is None or _is_marker(value.strip("\"'")):
            continue
        pieces.append(text[cursor:value_start])
        pieces.append(_marker("token" if kind == "authorization" else kind))
        cursor = value_end
    if not pieces:
        return text
    pieces.append(text[cursor:])
    return "".join(pieces)


# -- payment cards ----------------------------------------------------------------------

# 13-19 digits starting like a card number (2-6: Mastercard, Visa, Amex, Diners, JCB,
# Discover, UnionPay), plain or grouped by one kind of separator; judged by _card_repl.
_CARD_RE: Final = re.compile(
    r"(?<![0-9A-Za-z.\-+])[2-6][0-9](?:[0-9]|[ \-](?=[0-9])){11,22}(?![0-9A-Za-z]|[ .\-][0-9])"
)
_CARD_GROUPS: Final = re.compile(
    r"[0-9]{4}(?:([ \-])[0-9]{4}){2}\1[0-9]{1,7}|[0-9]{4}([ \-])[0-9]{6}\2[0-9]{4,5}"
)


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_repl(match: re.Match[str]) -> str:
    """A Luhn-valid card number (plain, or in 4-4-4-4 / 4-6-5 groups) -> a marker."""
    run = match.group(0)
    digits = run.replace(" ", "").replace("-", "")
    if not 13 <= len(digits) <= 19 or not _luhn_valid(digits):
        return run
    if len(digits) != len(run) and not _CARD_GROUPS.fullmatch(run):
        return run  # separators not where a card's groups are: an id, not a card
    return _marker("card")


# -- credentials in prose ---------------------------------------------------------------

# "password is X", "the secret was X", "Passwort lautet X", "mot de passe : X",
# "contraseña es X", "비밀번호는 X", "パスワードは X" ... (key/value forms such as
# "pwd: X" and "secret=X" are the key/value pass's).
_PROSE_KEYS: Final = (
    r"pass(?:word|wd|phrase|code)?|pwd|secret|(?:api|access|secret)[ _\-]?key|pin(?: code)?"
    r"|passwort|kennwort|mot de passe|contrase(?:ñ|n)a|clave|senha"
    r"|비밀번호|패스워드|암호|パスワード|暗証番号|密码|口令"
)
_PROSE_RE: Final = re.compile(
    rf"(?<![A-Za-z_])(?P<key>{_PROSE_KEYS})(?![A-Za-z_])"
    r"(?P<sep>"
    r"[ \t]*(?:[:=：]|->|=>)[ \t]*"
    r"|[ \t]+(?:is|was|is now|is still|is set to|was set to|set to|has been set to"
    r"|ist|lautet|war|est|était|es|era|é)(?:[ \t]*:)?[ \t]+"
    r"|(?:는|은|가|이|를|을|란|:)[ \t]*(?::[ \t]*)?"
    r"|(?:は|が|を)[ \t]*(?:[:：][ \t]*)?"
    r"|[ \t]+(?=[\"'])"
    r")",
    re.IGNORECASE,
)
_PROSE_NEEDLE_RE: Final = re.compile(
    r"pass|pwd|secret|key|pin|kennwort|mot de|contras|clave|senha"
    r"|비밀번호|패스워드|암호|パスワード|暗証番号|密码|口令",
    re.IGNORECASE,
)
# Words that follow "password is ..." in an ordinary message: the value is not a secret.
_PROSE_STOPWORDS: Final = frozenset(
    {
        "a",
        "an",
        "the",
        "not",
        "too",
        "now",
        "still",
        "also",
        "being",
        "been",
        "set",
        "required",
        "incorrect",
        "invalid",
        "wrong",
        "missing",
        "expired",
        "empty",
        "blank",
        "correct",
        "valid",
        "weak",
        "strong",
        "short",
        "long",
        "reset",
        "changed",
        "unset",
        "none",
        "null",
        "unknown",
        "ok",
        "fine",
        "locked",
        "disabled",
        "enabled",
        "needed",
        "mandatory",
        "optional",
        "rejected",
        "accepted",
        "redacted",
        "hidden",
        "same",
        "falsch",
        "ungültig",
        "erforderlich",
        "abgelaufen",
        "leer",
        "nicht",
        "requis",
        "invalide",
        "expiré",
        "vide",
        "pas",
        "obligatoria",
        "inválida",
        "incorrecta",
        "requerida",
        "vacía",
        "no",
        "틀렸습니다",
        "필요합니다",
        "잘못되었습니다",
        "만료되었습니다",
    }
)
_PROSE_VALUE_RE: Final = re.compile(r"[^\s,;\"'`)\]}]+")


def _redact_prose(text: str) -> str:
    pieces: list[str] = []
    cursor = 0
    for match in _PROSE_RE.finditer(text):
        pos = match.end()
        if pos < cursor:
            continue
        if pos < len(text) and text[pos] in "\"'":
            span = _value_span(text, pos)
            if span is None:
                continue
            start, end, _ = span
        else:
            value = _PROSE_VALUE_RE.match(text, pos)
            if value is None:
                continue
            start, end = value.span()
        word = text[start:end].rstrip(".!?:")
        if not word or _is_marker(word) or word.lower() in _PROSE_STOPWORDS:
            continue
        if word.startswith("[REDACTED"):
            continue
        key = match.group("key").lower()
        kind = "api_key" if "key" in key else "secret" if key == "secret" else "password"
        pieces.append(text[cursor:start])
        pieces.append(_marker(kind))
        cursor = end
    if not pieces:
        return text
    pieces.append(text[cursor:])
    return "".join(pieces)


# -- encoded text ------------------------------------------------------------------------

_PERCENT_RUN_RE: Final = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_JSON_ESCAPE_RE: Final = re.compile(r"\\{1,4}(?:u[0-9A-Fa-f]{4}|/)")  # escaped, or escaped twice
# Characters that end a value in a query or a quoted string: decoding them would cut an
# encoded secret in two, so they stay encoded (a value holding "%26" is still one value).
_KEEP_ENCODED: Final = frozenset("&;,\"'`")
_KEEP_NOTHING: Final[frozenset[str]] = frozenset()
_QUERY_RE: Final = re.compile(r"\?[^\s'\"<>`]+")
_MAX_DECODE_ROUNDS: Final = 3


def _percent_run(match: re.Match[str], keep: frozenset[str]) -> str:
    decoded = urllib.parse.unquote(match.group(0), errors="replace")
    if not any(char in keep or char < " " for char in decoded):
        return decoded
    # control characters stay encoded too: "%09" inside a password is not a separator
    return "".join(urllib.parse.quote(c, safe="") if c in keep or c < " " else c for c in decoded)


def _json_unescape(match: re.Match[str], keep: frozenset[str]) -> str:
    escape = match.group(0)
    if escape.endswith("/"):
        return "/"
    char = chr(int(escape[-4:], 16))
    if char in keep or "\ud800" <= char <= "\udfff":
        return escape
    return char


def _decode_once(text: str, keep: frozenset[str]) -> str:
    """``text`` with one layer of percent-encoding and JSON ``\\uXXXX`` / ``\\/`` escapes
    undone, except for the characters in ``keep``."""
    if "%" in text:
        text = _PERCENT_RUN_RE.sub(lambda match: _percent_run(match, keep), text)
    if "\\" in text:
        text = _JSON_ESCAPE_RE.sub(lambda match: _json_unescape(match, keep), text)
    return text


# Runs that may be base64 (standard or URL-safe) of a text holding a secret.
_BASE64_RE: Final = re.compile(
    r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{12,}={0,2}(?![A-Za-z0-9+/_\-=])"
)
_PRINTABLE_RE: Final = re.compile(r"[\t\n\r\x20-\x7e\u00a0-\uffff]*")


def _base64_text(run: str) -> str | None:
    """The text ``run`` decodes to when it is base64 of printable UTF-8 text, else None."""
    core = run.rstrip("=")
    if len(core) % 4 == 1 or (core.isalpha() and (core.islower() or core.isupper())):
        return None
    try:
        raw = base64.b64decode(
            core.replace("-", "+").replace("_", "/") + "=" * (-len(core) % 4), validate=True
        )
        decoded = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    if len(decoded) < 6 or not _PRINTABLE_RE.fullmatch(decoded):
        return None
    return decoded


def _base64_repl(match: re.Match[str]) -> str:
    run = match.group(0)
    decoded = _base64_text(run)
    if decoded is None or _scrub_plain(decoded) == decoded:
        return run
    return _marker("secret")


_Replacement = str | Callable[[re.Match[str]], str]

# (pattern, replacement, needles): a pass runs only when one of its needles occurs in the
# lower-cased text (None: always).  The needles are cheap C-speed pre-checks.
_TEXT_PASSES: Final[tuple[tuple[re.Pattern[str], _Replacement, tuple[str, ...] | None], ...]] = (
    (_PRIVATE_KEY_RE, _marker("private_key"), ("private key", "private%20key", "private+key")),
    (_URL_USERINFO_RE, r"\g<scheme>" + REDACTED + "@", ("://",)),
    (_JWT_RE, _marker("jwt"), ("eyj",)),
    (_API_KEY_RE, _marker("api_key"), None),
    (_BEARER_RE, _bearer_repl, ("bearer", "basic")),
    (_EMAIL_RE, _marker("email"), ("@",)),
    (_ENTROPY_RE, _entropy_repl, None),
    (_PHONE_RE, _marker("phone"), None),
    (_CARD_RE, _card_repl, None),
)


def _scrub_plain(text: str) -> str:
    """Every pass over ``text`` as it is (no decoding)."""
    lowered = text.lower()
    for pattern, replacement, needles in _TEXT_PASSES:
        if needles is not None and not any(needle in lowered for needle in needles):
            continue
        text = pattern.sub(replacement, text)
    if ":" in text or "=" in text:
        text = _redact_key_values(text)
    if "-" in text:
        text = _redact_cli_flags(text)
    if _PROSE_NEEDLE_RE.search(text):
        text = _redact_prose(text)
    return text


def _plus_as_space(text: str) -> str:
    """Form encoding: "+" is a space in percent-encoded text and in a URL's query -- never
    in a URL's user-info, where it is the character itself (a password such as
    ``0000+%00`` stays one user-info to redact)."""
    if "+" not in text:
        return text
    if _PERCENT_RUN_RE.search(text):
        kept = [match.span() for match in _URL_USERINFO_RE.finditer(text)]
        if not kept:
            return text.replace("+", " ")
        pieces, at = [], 0
        for start, end in kept:
            pieces += [text[at:start].replace("+", " "), text[start:end]]
            at = end
        return "".join([*pieces, text[at:].replace("+", " ")])
    if "?" in text:
        return _QUERY_RE.sub(lambda match: match.group(0).replace("+", " "), text)
    return text


def _layered(text: str, *, scrub_each: bool, restart: bool = False) -> tuple[str, bool]:
    """``text`` decoded layer by layer (up to 3 per stage) and scrubbed: after each layer
    (``scrub_each``, so a secret whose own characters are percent-encoded is found before
    they are decoded) or once at the end (so a token split by an encoded space is whole
    again). Stages: decoded but for the characters that end a value (an encoded "&"
    inside a secret keeps it one value), then entirely, "+" as a space. The second stage
    goes on from what the first found, or (``restart``, or when it found nothing) starts
    again from the text as it came: "+" is a space only in the text as it came, never a
    "+" that decoding made ("%2B" inside a token). Also says whether anything was found."""
    current = text
    found = False
    for keep in (_KEEP_ENCODED, _KEEP_NOTHING):
        if keep is _KEEP_NOTHING and (restart or not found):
            current = text  # start again from the text as it came
            spaced = _plus_as_space(current)
            if spaced != current:
                current = _scrub_plain(spaced) if scrub_each else spaced
                found = found or current != spaced
        for _ in range(_MAX_DECODE_ROUNDS):
            decoded = _decode_once(current, keep)
            if decoded == current:
                break
            current = _scrub_plain(decoded) if scrub_each else decoded
            found = found or current != decoded
        if not scrub_each:
            scrubbed = _scrub_plain(current)
            found = found or scrubbed != current
            current = scrubbed
    return current, found


def _visible(text: str) -> int:
    """How many letters and digits ``text`` shows outside redaction markers."""
    return sum(char.isalnum() for char in _MARKER_RE.sub("", text))


def _scrub_decoded(text: str) -> str:
    """``text`` scrubbed after decoding, when the decoded text holds something to redact
    (of two ways of decoding, the one that leaves less visible); else ``text`` scrubbed
    as it is."""
    candidates = [
        result
        for scrub_each in (True, False)
        for restart in (False, True)
        for result, found in (_layered(text, scrub_each=scrub_each, restart=restart),)
        if found
    ]
    if not candidates:
        return _scrub_plain(text)
    return min(candidates, key=_visible)


# What decoding leaves of a secret right after its marker ("[REDACTED:token]+drT%2F..."
# when an encoded "+" ended the match): the rest of the word, up to a value terminator,
# is the same secret.
_SECRET_REMNANT_RE: Final = re.compile(
    r"(?P<marker>\[REDACTED:(?:token|secret|api_key|jwt|password)\])[^\s'\"`&;,<>()\[\]{}\\]+"
)


def _scrub_full(text: str) -> str:
    """Every pass. Text with percent-encoding or JSON escapes is decoded first and the
    decoded text is what comes out when it holds something to redact; runs that are
    base64 of a text holding a secret become ``[REDACTED:secret]``."""
    encoded = "%" in text or "\\" in text or ("+" in text and "?" in text)
    if encoded:
        text = _SECRET_REMNANT_RE.sub(r"\g<marker>", _scrub_decoded(text))
    else:
        text = _scrub_plain(text)
    if len(text) >= 12 and _BASE64_RE.search(text):
        text = _BASE64_RE.sub(_base64_repl, text)
    return text


def _drop_last_token(text: str) -> str:
    """``text`` without its trailing run of non-space characters (possibly a cut secret)."""
    last_space = _WHITESPACE_RE.search(text[::-1])
    return text[: len(text) - last_space.start()] if last_space else ""


_CACHE_MAX_TEXT = 2048


@functools.lru_cache(maxsize=512)
def _scrub_cached(text: str) -> str:
    """``_scrub_full`` remembered: one failure's message is scrubbed at several layers
    (error data, failure record, log line); the patterns are fixed, so the answer is too."""
    return _scrub_full(text)


def incident_message(incident_id: str) -> str:
    """The message a client gets for an unmapped failure: ``Internal error (incident
    <id>).`` -- our own words and id, kept as they are by ``scrub_text`` and
    ``strip_locations`` without a scan (each failure has a fresh id, which no cache of
    scrubbed text would hold)."""
    return f"Internal error (incident {incident_id})."


def _own_incident_text(text: str) -> bool:
    """``text`` is a bare incident id or ``incident_message``'s text for one."""
    if len(text) == _INCIDENT_ID_LENGTH:
        return _INCIDENT_ID_RE.fullmatch(text) is not None
    if len(text) != _INCIDENT_MESSAGE_LENGTH:
        return False
    return _INCIDENT_MESSAGE_RE.fullmatch(text) is not None


class ScrubbedText(str):
    """A ``str`` built only from what ``scrub_text`` returned and text of our own making
    (ids, type names already scrubbed). A log record whose message is one, without
    arguments, is not scrubbed a second time when it is created (``core.logs``): wrap
    only text whose every part went through ``scrub_text``."""

    __slots__ = ()


def scrub_text(text: str, *, max_length: int = 2000) -> str:
    """Return ``text`` with every credential and piece of personal data replaced.

    The caller sees the text with these replaced (the surrounding words are kept):

    * ``Authorization: <scheme> <value>`` and ``Bearer``/``Basic`` credentials anywhere ->
      the scheme word stays, the value becomes ``[REDACTED:token]``;
    * JWTs -> ``[REDACTED:jwt]``; well-known API keys (OpenAI/Anthropic ``sk-``, AWS
      ``AKIA``/``ASIA``, GitHub, GitLab, Slack, Google ``AIza``, Stripe, Hugging Face, npm)
      -> ``[REDACTED:api_key]``; PEM private-key blocks -> ``[REDACTED:private_key]``;
    * values of secret-ish keys (``password=``, ``"api_key": "..."``, ``?access_token=``,
      ``X-Api-Key:``, ``--password x``, camelCase too) -> ``[REDACTED:<kind>]`` with the key
      kept; ``Cookie:``/``Set-Cookie:`` header values are redacted to the end of the line;
    * values of identity keys (``user_id=``, ``username:``, ``customer_id``, ``email``,
      ``phone`` ...) -> ``[REDACTED:user_id]`` / ``[REDACTED:email]`` / ``[REDACTED:phone]``;
    * URL user-info -> ``scheme://[REDACTED]@host`` (whole: a "+" in it is the character,
      never a form-encoded space);
    * e-mail addresses -> ``[REDACTED:email]``; phone numbers (E.164, Korean mobile,
      North American with separators) -> ``[REDACTED:phone]``;
    * card numbers (13-19 digits starting with 2-6, plain or in card groups, Luhn-valid)
      -> ``[REDACTED:card]``;
    * credentials in prose ("password is X", "PIN is X", "Passwort ist X", "mot de passe
      : X", "contraseña es X", "비밀번호는 X", "パスワードは X" ...) -> ``[REDACTED:password]``
      (a word such as "required" or "incorrect" after "password is" is kept);
    * pydantic's ``input_value=...`` -> ``[REDACTED:input]``;
    * runs of 32+ token characters that contain letters and digits and look random ->
      ``[REDACTED:secret]``; runs that are base64 of a text holding any of the above ->
      ``[REDACTED:secret]``.

    Percent-encoded and JSON-escaped text (``%40``, ``%2540``, ``\\u0040``, ``\\/``) is
    decoded layer by layer before matching; when the decoded text holds something, the
    decoded, scrubbed text is returned. PEM private keys are matched as one block (RSA,
    EC, OpenSSH, PGP; cut short, or a tail without its ``BEGIN`` line).

    Kept on purpose: dates, times, versions, ports, HTTP statuses, counts, IP addresses,
    16-hex keyed hashes, file paths, canonical UUIDs (correlation ids such as task or
    context ids) and bare incident ids (12 lowercase hex digits, as in ``incidentId``): a
    text that is one id alone is returned without scanning (a UUID or an incident id under
    a secret or identity key of evidence is still redacted).

    The result is at most ``max_length`` characters followed by ``"…[truncated]"`` when
    longer.  Inputs far longer than ``max_length`` are cut before scanning (the possibly
    split last token is dropped).  Never raises: on an internal error the whole text is
    replaced by ``[REDACTED:scrub_failed]``.
    """
    try:
        if not isinstance(text, str):
            text = str(text)
        limit = max(0, int(max_length))
        cut = False
        hard_limit = limit * 4 + 1024
        if len(text) > hard_limit:
            text = _drop_last_token(text[:hard_limit])
            cut = True
        if len(text) == _UUID_LENGTH and _UUID_RE.fullmatch(text):
            return text  # a bare correlation id (task, context, incident): kept as is
        if _own_incident_text(text):
            result = text  # the client reads it as it is (incidentId, the message)
        elif len(text) <= _CACHE_MAX_TEXT:
            result = _scrub_cached(text)
        else:
            result = _scrub_full(text)
        if cut or len(result) > limit:
            result = result[:limit] + _TRUNCATED
        return result
    except Exception:  # a scrubber bug must never leak the raw text nor raise
        return _SCRUB_FAILED_TEXT


# --------------------------------------------------------------------------------------
# Upstream locations (client-visible text and log lines)
# --------------------------------------------------------------------------------------

# scheme://anything up to whitespace or a quote, without trailing punctuation.
_LOCATION_URL_RE: Final = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s'\"<>`]*[^\s'\"<>`.,;:!?)\]}]"
)
_LOCATION_HOST_PORT_RE: Final = re.compile(
    r"(?<![A-Za-z0-9.\-])(?:localhost|\[[0-9A-Fa-f:.]{2,45}\]"
    r"|(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,10}[A-Za-z0-9\-]{1,63})"
    r":[0-9]{1,5}(?![0-9A-Za-z])"
)
_OCTET: Final = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LOCATION_IPV4_RE: Final = re.compile(rf"(?<![0-9.]){_OCTET}(?:\.{_OCTET}){{3}}(?![0-9]|\.[0-9])")
# A socket address as Python prints it: ('127.0.0.1', 5432) or ('::1', 5432, 0, 0).
_LOCATION_SOCKADDR_RE: Final = re.compile(
    r"\(\s*['\"][^'\"\s]{1,255}['\"]\s*,\s*[0-9]{1,5}(?:\s*,\s*[0-9]{1,10}){0,2}\s*\)"
)
# "port 5432", "port=5432": the port of a backend.
_LOCATION_PORT_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?P<key>port)(?P<sep>[ \t]*[:=][ \t]*|[ \t]+)[0-9]{2,5}(?![0-9])",
    re.IGNORECASE,
)
# Host names: a dotted name ending in a public or internal top-level domain, "localhost",
# and the value after "host"/"hostname"/"server" ("host \"db\"", "host=db-1").
_HOST_TLDS: Final = (
    "com|net|org|io|dev|app|cloud|ai|co|biz|info|us|uk|de|fr|kr|jp|cn|eu|me|tech|site"
    "|internal|local|localdomain|lan|corp|home|intranet|svc|cluster|private|test|example"
    "|invalid|arpa|onion|amazonaws|azure|gcp"
)
_LOCATION_HOSTNAME_RE: Final = re.compile(
    r"(?<![A-Za-z0-9.\-_@/])(?:localhost(?![A-Za-z0-9_.\-])"
    r"|(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,10}"
    rf"(?:{_HOST_TLDS})(?![A-Za-z0-9_\-]|\.[A-Za-z0-9]))",
    re.IGNORECASE,
)
_LOCATION_HOST_VALUE_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?P<key>host(?:[ _]?name)?|server|hostaddr)"
    r"(?P<sep>[ \t]*[:=][ \t]*|[ \t]+)(?P<quote>[\"']?)"
    r"(?P<value>[A-Za-z0-9][A-Za-z0-9.\-_]{0,252})(?P=quote)"
    r"(?![A-Za-z0-9.\-_])",
    re.IGNORECASE,
)
_HOST_VALUE_KEEP: Final = frozenset(
    {"is", "was", "not", "unreachable", "down", "error", "closed", "refused", "name", "the", "a"}
)
_LOCATION_NEEDLE_RE: Final = re.compile(r"[.:'\"]|host|port|server", re.IGNORECASE)
_URL_MARKER: Final = "[REDACTED:url]"
_HOST_MARKER: Final = "[REDACTED:host]"
_PORT_MARKER: Final = "[REDACTED:port]"


def _host_value_repl(match: re.Match[str]) -> str:
    quote = match.group("quote")
    if match.group("value").lower() in _HOST_VALUE_KEEP:
        return match.group(0)
    if not quote and ":" not in match.group("sep") and "=" not in match.group("sep"):
        return match.group(0)  # "server responded": only host=x, host: x, host "x"
    return f"{match.group('key')}{match.group('sep')}{quote}{_HOST_MARKER}{quote}"


def _strip_addresses(text: str) -> str:
    """URLs, socket addresses, ``host:port`` pairs, IPv4 addresses and ``port N``: the
    location shapes that never read as anything else, even in a line of source code."""
    text = _LOCATION_URL_RE.sub(_URL_MARKER, text)
    if "(" in text:
        text = _LOCATION_SOCKADDR_RE.sub(_HOST_MARKER, text)
    text = _LOCATION_HOST_PORT_RE.sub(_HOST_MARKER, text)
    text = _LOCATION_IPV4_RE.sub(_HOST_MARKER, text)
    if "port" in text.lower():
        text = _LOCATION_PORT_RE.sub(rf"\g<key>\g<sep>{_PORT_MARKER}", text)
    return text


@lru_cache(maxsize=1024)
def _strip_locations_cached(text: str) -> str:
    if not _LOCATION_NEEDLE_RE.search(text):
        return text
    text = _strip_addresses(text)
    lowered = text.lower()
    if "." in text or "localhost" in lowered:
        text = _LOCATION_HOSTNAME_RE.sub(_HOST_MARKER, text)
    if "host" in lowered or "server" in lowered:
        text = _LOCATION_HOST_VALUE_RE.sub(_host_value_repl, text)
    return text


def strip_locations(text: str) -> str:
    """``text`` with every upstream location removed (see the module docstring).

    URLs of any scheme (with their user-info, host, path and query) become
    ``[REDACTED:url]``; ``host:port`` pairs (a dotted name, ``localhost``, an IPv4 or a
    bracketed IPv6 address), bare IPv4 addresses, socket addresses as Python prints them
    (``('127.0.0.1', 5432)``, ``('::1', 5432, 0, 0)``), host names ending in a public or
    internal domain (``db.prod.internal``) and the value of ``host=``, ``host name "x"``,
    ``server: x`` become ``[REDACTED:host]``; the number after ``port`` becomes
    ``[REDACTED:port]``. Never raises (``[REDACTED:scrub_failed]`` on an internal error).
    """
    try:
        if not isinstance(text, str):
            text = str(text)
        if _own_incident_text(text):
            return text
        if len(text) > _CACHE_MAX_TEXT:
            return _strip_locations_cached.__wrapped__(text)
        return _strip_locations_cached(text)
    except Exception:
        return _SCRUB_FAILED_TEXT


def scrub_public_text(text: str, *, max_length: int = 2000) -> str:
    """:func:`scrub_text` plus :func:`strip_locations`: text that may leave the process.

    Use it for every message a client, a model or an event consumer reads; a log line
    passes :func:`scrub_log_text`, the same policy made safe for tracebacks.
    """
    return strip_locations(scrub_text(text, max_length=max_length))


_FRAME_LINE: Final = '  File "'
_SOURCE_INDENT: Final = "    "


def scrub_log_text(text: str, *, max_length: int = 2000) -> str:
    """:func:`scrub_text` plus :func:`strip_locations`, for a log line or a traceback.

    Every line loses its upstream locations as a client message does, except the lines
    of a traceback's frames (``  File "...", line N, in f`` and the indented source and
    caret lines under it): those lose URLs, ``host:port`` pairs, IP and socket addresses
    and ``port N``, but keep dotted names, so ``self.app(scope)`` or ``logger.info(x)``
    in a source line reads as written. Never raises.
    """
    scrubbed = scrub_text(text, max_length=max_length)
    if "\n" not in scrubbed:
        return strip_locations(scrubbed)
    try:
        if len(scrubbed) > _CACHE_MAX_TEXT:
            return _strip_log_locations.__wrapped__(scrubbed)
        return _strip_log_locations(scrubbed)
    except Exception:
        return _SCRUB_FAILED_TEXT


@lru_cache(maxsize=256)
def _strip_log_locations(text: str) -> str:
    """``scrub_log_text``'s location rule for scrubbed text of several lines (remembered:
    a failure at a known place logs the same traceback again)."""
    lines = text.split("\n")
    in_frame = False
    for index, line in enumerate(lines):
        if line.startswith(_FRAME_LINE):
            in_frame = True
        elif not line.startswith(_SOURCE_INDENT):
            in_frame = False
        if in_frame:
            lines[index] = _strip_addresses(line)
        elif line:
            lines[index] = strip_locations(line)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Keyed hashes
# --------------------------------------------------------------------------------------

_hash_key: bytes | None = None
_hash_key_lock: Final = threading.Lock()


def _current_hash_key() -> bytes:
    global _hash_key
    key = _hash_key
    if key is not None:
        return key
    with _hash_key_lock:
        if _hash_key is None:
            _hash_key = scrub_key_setting() or secrets.token_bytes(32)
        return _hash_key


def keyed_hash(value: str) -> str:
    """Return the first 16 hex chars of HMAC-SHA256(key, value).

    The key comes from the ``LLAMON_SCRUB_KEY`` environment variable, read on first use,
    or from :func:`set_hash_key`.  Without either, a random per-process key is used: hashes
    are then stable within one process only (fine for correlating records of one run; set
    ``LLAMON_SCRUB_KEY`` to correlate across processes and restarts).
    """
    data = value if isinstance(value, str) else str(value)
    digest = hmac.new(
        _current_hash_key(), data.encode("utf-8", "surrogatepass"), hashlib.sha256
    ).hexdigest()
    return digest[:16]


def set_hash_key(key: bytes | str | None) -> None:
    """Set the key used by :func:`keyed_hash` (a str is UTF-8 encoded).

    ``None`` installs a fresh random key (the environment variable is not re-read).  Hashes
    made before the change no longer match hashes made after it.  An empty key is refused
    with ``ValueError``.
    """
    global _hash_key
    if key is None:
        new_key = secrets.token_bytes(32)
    elif isinstance(key, str):
        new_key = key.encode("utf-8")
    elif isinstance(key, bytes | bytearray):
        new_key = bytes(key)
    else:
        raise TypeError(f"hash key must be bytes, str or None, not {type(key).__name__}")
    if not new_key:
        raise ValueError("hash key must not be empty")
    with _hash_key_lock:
        _hash_key = new_key


# --------------------------------------------------------------------------------------
# Evidence
# --------------------------------------------------------------------------------------

_EVIDENCE_KEY_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")

_CREDENTIAL_KEYS: Final = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "auth_code",
        "authorization",
        "authorization_code",
        "bearer",
        "client_secret",
        "cookie",
        "credential",
        "credentials",
        "cvc",
        "cvv",
        "id_token",
        "jwt",
        "mfa_code",
        "otp",
        "otp_code",
        "passwd",
        "password",
        "pin",
        "pin_code",
        "private_key",
        "proxy_authorization",
        "refresh_token",
        "secret",
        "security_code",
        "set_cookie",
        "token",
        "totp_code",
        "verification_code",
        "x_api_key",
    }
)
_CREDENTIAL_SUFFIXES: Final = (
    "_token",
    "_secret",
    "_password",
    "_passwd",
    "_api_key",
    "_apikey",
    "_access_key",
    "_secret_key",
    "_private_key",
    "_credential",
    "_credentials",
    "_cookie",
    "_jwt",
    "_passphrase",
    "_otp",
)
# Plural credential words are innocent for counts ("input_tokens": 10) but not for strings
# or lists of strings ("refresh_tokens": ["..."]): those are treated as credentials.
_CREDENTIAL_PLURALS: Final = ("tokens", "secrets", "passwords", "api_keys", "cookies")
_CREDENTIAL_PLURAL_SUFFIXES: Final = tuple("_" + plural for plural in _CREDENTIAL_PLURALS)

_IDENTITY_KEYS: Final = frozenset(
    {
        "account_id",
        "customer_id",
        "e_mail",
        "email",
        "ip",
        "ip_address",
        "member_id",
        "mobile",
        "phone",
        "phone_number",
        "session_id",
        "sessionid",
        "uid",
        "user",
        "user_id",
        "userid",
        "username",
    }
)

_DEFAULT_ALLOWED_KEYS: Final = frozenset(
    {
        "agent",
        "arguments_preview",
        "dropped_keys",
        "attempt",
        "attempt_codes",
        "attempts",
        "auth_readiness",
        "candidate_names",
        "cause",
        "chain",
        "completed_nodes",
        "content_type",
        "context_id",
        "count",
        "current_tool",
        "domain",
        "domain_code",
        "elapsed_ms",
        "enum_values",
        "error_code",
        "error_source",
        "error_type",
        "exception_type",
        "expected_target",
        "field_name",
        "field_path",
        "fields",
        "filter",
        "graph_version",
        "http_status",
        "incident_id",
        "input_mode",
        "input_modes",
        "jsonrpc_code",
        "label_hints",
        "limit",
        "llm_target",
        "margin",
        "max_depth",
        "max_rounds",
        "max_size",
        "mcp_code",
        "method",
        "missing_fields",
        "node",
        "node_id",
        "node_kind",
        "options_path",
        "output_modes",
        "override_flag",
        "plan_id",
        "producer_name",
        "query",
        "rank_signals",
        "reason",
        "required",
        "retried",
        "retry_after_ms",
        "returned_tool_names",
        "round",
        "rounds",
        "safe_enum_values",
        "score",
        "scores",
        "selected_target",
        "semantic_tag",
        "size",
        "stage",
        "status",
        "status_code",
        "step_id",
        "target_tool",
        "task_id",
        "thread_id",
        "threshold",
        "tied_candidates",
        "timeout_ms",
        "timeout_s",
        "tool",
        "tool_call_id",
        "tool_name",
        "top_k",
        "trace_metadata",
        "truncated",
        "url_path",
        "violation_category",
    }
)
_DEFAULT_ALLOWED_SUFFIXES: Final = (
    "_present",
    "_hash",
    "_count",
    "_ms",
    "_s",
    "_seconds",
    "_tokens",
    "_names",
    "_status",
    "_code",
    "_version",
    "_kind",
    "_type",
    "_index",
    "_reason",
    "_flag",
    "_enabled",
    "_required",
    "_size",
    "_limit",
)

_allowed_keys: frozenset[str] = _DEFAULT_ALLOWED_KEYS
_allowed_suffixes: tuple[str, ...] = _DEFAULT_ALLOWED_SUFFIXES
_allow_lock: Final = threading.Lock()


@lru_cache(maxsize=1024)
def _normalise_key(key: str) -> str:
    """``"X-Api-Key"`` -> ``"x_api_key"``, ``"userId"`` -> ``"user_id"`` (remembered: the
    same few evidence keys come back with every record)."""
    return _CAMEL_RE.sub("_", key).lower().replace("-", "_").replace(".", "_")


def _is_credential(norm: str) -> bool:
    return norm in _CREDENTIAL_KEYS or norm.endswith(_CREDENTIAL_SUFFIXES)


def _is_plural_credential(norm: str, value: object) -> bool:
    if value is None or isinstance(value, bool | int | float):
        return False
    return norm in _CREDENTIAL_PLURALS or norm.endswith(_CREDENTIAL_PLURAL_SUFFIXES)


def _is_allowed(norm: str) -> bool:
    return norm in _allowed_keys or norm.endswith(_allowed_suffixes)


def _present(value: object) -> bool:
    try:
        return bool(value)
    except Exception:  # an object whose __bool__ fails is still "something was there"
        return True


def _hash_of(value: object) -> str | None:
    if value is None:
        return None
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = type(value).__name__
    return keyed_hash(text)


def _scrub_mapping(mapping: Mapping[Any, object], depth: int) -> dict[str, object]:
    result: dict[str, object] = {}
    dropped: set[str] = set()
    for raw_key, value in mapping.items():
        if not isinstance(raw_key, str) or not _EVIDENCE_KEY_RE.fullmatch(raw_key):
            continue  # not a plain name (it could itself be an e-mail or a token)
        key = str.__str__(raw_key)
        scrubbed_key = scrub_text(key, max_length=64)
        if scrubbed_key != key:
            dropped.add(scrubbed_key)  # the key name itself held a secret
            continue
        norm = _normalise_key(key)
        if _is_credential(norm) or _is_plural_credential(norm, value):
            result[f"{key}_present"] = _present(value)
        elif norm in _IDENTITY_KEYS:
            result[f"{key}_hash"] = _hash_of(value)
        elif _is_allowed(norm):
            result[key] = _scrub_value(value, depth + 1)
        else:
            dropped.add(key)
    if dropped:
        earlier = result.get("dropped_keys")
        if isinstance(earlier, list):  # re-scrubbing a scrubbed dict: keep what it listed
            dropped.update(str(name) for name in earlier)
        result["dropped_keys"] = sorted(dropped)
    return result


def _scrub_value(value: object, depth: int) -> object:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):  # evidence feeds records and events: no location either
        return scrub_public_text(str.__str__(value), max_length=_EVIDENCE_TEXT_LIMIT)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"[bytes:{len(value)}]"
    if isinstance(value, Mapping):
        if depth > _MAX_DEPTH:
            return _DEPTH_LIMIT
        return _scrub_mapping(value, depth)
    if isinstance(value, list | tuple | set | frozenset):
        if depth > _MAX_DEPTH:
            return _DEPTH_LIMIT
        items: Iterable[object] = value
        if isinstance(value, set | frozenset):
            try:
                items = sorted(value)
            except TypeError:
                items = list(value)
        scrubbed: list[object] = []
        for item in items:
            if len(scrubbed) >= _MAX_ITEMS:
                break
            scrubbed.append(_scrub_value(item, depth + 1))
        return scrubbed
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return scrub_text(f"{type(value).__name__}.{value.name}", max_length=_EVIDENCE_TEXT_LIMIT)
    # Anything else: its type name only, never its repr (which may hold secrets).
    return scrub_text(type(value).__name__, max_length=_EVIDENCE_TEXT_LIMIT)


def scrub_value(value: object) -> object:
    """Return the safe form of one evidence value (the policy used for allowed keys).

    The caller sees: ``str`` -> :func:`scrub_public_text` with ``max_length=500`` (no
    location either); ``int``, ``float``, ``bool`` and ``None`` unchanged (subclasses
    such as ``IntEnum`` become plain ``int``/``float``); lists, tuples and sets -> a
    list of their first 50 items, each scrubbed (sets sorted when possible); mappings
    -> :func:`scrub_evidence` applied recursively, with ``"[depth-limit]"`` in place of
    anything nested deeper than 5 levels; ``bytes`` -> ``"[bytes:N]"``;
    ``datetime``/``date``/``time`` -> ISO text; enum members -> ``"Type.NAME"``; any
    other object -> its type name only, never its repr. Never raises
    (``"[scrub-failed]"`` on an internal error).
    """
    try:
        return _scrub_value(value, 1)
    except Exception:
        return "[scrub-failed]"


def scrub_evidence(evidence: Mapping[str, object] | None) -> dict[str, object]:
    """Return a new dict holding only what may be stored or shown from ``evidence``.

    Keys that are not plain names (``^[A-Za-z_][A-Za-z0-9_.-]{0,63}$``) are dropped
    silently.  The rest are compared case-insensitively with ``-``, ``.`` and camelCase
    normalised to ``_`` (``X-Api-Key`` -> ``x_api_key``), in this order:

    1. credential keys (``token``, ``password``, ``authorization``, ``cookie``, ``api_key``,
       ``client_secret``, OTP codes ..., and keys ending in ``_token``, ``_secret``,
       ``_password``, ``_api_key`` ...) become ``{key}_present: bool(value)``; plural forms
       such as ``refresh_tokens`` are treated the same unless their value is a number;
    2. identity keys (``user_id``, ``username``, ``email``, ``phone``, ``session_id``,
       ``customer_id``, ``ip`` ...) become ``{key}_hash: keyed_hash(str(value))`` (``None``
       stays ``None``);
    3. allowed keys (a built-in list of operational names such as ``field_name``,
       ``http_status``, ``tool_name``, ``elapsed_ms``, plus any key ending in an allowed
       suffix such as ``_tokens``, ``_hash``, ``_ms``, ``_status``; see
       :func:`allow_evidence_keys`) keep their value, passed through :func:`scrub_value`.

    Every other key is dropped; the dropped names are listed, sorted, under
    ``dropped_keys`` (present only when something was dropped).  A key whose name itself
    contains a secret is dropped and listed in its scrubbed form.  ``None`` gives ``{}``.
    Never raises: on an internal error (or a non-mapping argument) the result is
    ``{"scrub_failed": True}``.
    """
    if evidence is None:
        return {}
    try:
        if not isinstance(evidence, Mapping):
            return {"scrub_failed": True}
        return _scrub_mapping(evidence, 0)
    except Exception:
        return {"scrub_failed": True}


def allow_evidence_keys(*keys: str, suffixes: Iterable[str] = ()) -> None:
    """Add names to the evidence allow-list for the rest of the process.

    ``keys`` are exact names; ``suffixes`` are name endings such as ``"_region"``.  Both
    are matched like :func:`scrub_evidence` matches keys (case-insensitive, ``-``, ``.``
    and camelCase normalised to ``_``).  Allowing a credential or identity key has no
    effect: those rules take precedence.  Invalid names (not matching the evidence key
    pattern, or an empty suffix) raise ``ValueError`` and nothing is added.
    """
    global _allowed_keys, _allowed_suffixes
    new_keys: set[str] = set()
    for key in keys:
        if not isinstance(key, str) or not _EVIDENCE_KEY_RE.fullmatch(key):
            raise ValueError(f"not a valid evidence key name: {key!r}")
        new_keys.add(_normalise_key(key))
    new_suffixes: list[str] = []
    for suffix in suffixes:
        if not isinstance(suffix, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", suffix):
            raise ValueError(f"not a valid evidence key suffix: {suffix!r}")
        new_suffixes.append(_normalise_key(suffix))
    with _allow_lock:
        _allowed_keys = _allowed_keys | new_keys
        _allowed_suffixes = _allowed_suffixes + tuple(
            suffix for suffix in dict.fromkeys(new_suffixes) if suffix not in _allowed_suffixes
        )


def _forwarded_value(value: object, depth: int) -> object:
    if isinstance(value, str):
        return scrub_public_text(str.__str__(value), max_length=_EVIDENCE_TEXT_LIMIT)
    if isinstance(value, Mapping):
        if depth > _MAX_DEPTH:
            return _DEPTH_LIMIT
        return _forwarded_mapping(value, depth + 1)
    if isinstance(value, list | tuple):
        if depth > _MAX_DEPTH:
            return _DEPTH_LIMIT
        return [_forwarded_value(item, depth + 1) for item in value[:_MAX_ITEMS]]
    return _scrub_value(value, depth)


def _forwarded_mapping(mapping: Mapping[Any, object], depth: int) -> dict[str, object]:
    result: dict[str, object] = {}
    for raw_key, value in mapping.items():
        if len(result) >= _MAX_ITEMS:
            break
        key = scrub_text(
            str.__str__(raw_key) if isinstance(raw_key, str) else str(raw_key), max_length=64
        )
        norm = _normalise_key(key)
        if _is_credential(norm) or _is_plural_credential(norm, value):
            result[key] = REDACTED if _present(value) else None
        elif norm in _IDENTITY_KEYS:
            result[key] = _hash_of(value)
        else:
            result[key] = _forwarded_value(value, depth)
    return result


def scrub_forwarded(fields: Mapping[str, object] | None) -> dict[str, object]:
    """The safe form of fields received from elsewhere and passed on (unknown event fields).

    Unlike :func:`scrub_evidence` no key is dropped for being unknown: every key stays
    (its name passed through :func:`scrub_text`), and its value is scrubbed by value:
    text through :func:`scrub_public_text` (500 characters at most), mappings and lists
    recursively (50 items, 5 levels), anything else as :func:`scrub_value` does. Keys
    that name a credential keep their key with ``"[REDACTED]"`` as the value (``None``
    when empty); identity keys (``user_id``, ``email`` ...) hold ``keyed_hash`` of theirs.
    Never raises (``{"scrub_failed": True}`` on an internal error).
    """
    if not fields:
        return {}
    try:
        if not isinstance(fields, Mapping):
            return {"scrub_failed": True}
        return _forwarded_mapping(fields, 1)
    except Exception:
        return {"scrub_failed": True}

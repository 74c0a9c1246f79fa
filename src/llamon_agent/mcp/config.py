"""The MCP servers of this process, read from an ``mcp.json``.

The file has the shape MCP hosts already use::

    {
      "mcpServers": {
        "bookshop": {"command": "python", "args": ["bookshop_mcp_server.py"],
                     "env": {"SHOP_TOKEN": "${SHOP_TOKEN}"}},
        "search": {"url": "http://127.0.0.1:8765/mcp",
                   "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}}
      }
    }

A server has either ``command`` (stdio: ``args``, ``env``, ``cwd`` optional) or ``url``
(streamable HTTP: ``headers`` optional). ``type`` may say ``stdio`` or ``http`` /
``streamable-http``; ``"disabled": true`` skips a server; other keys are ignored. String
values may use ``${VAR}`` / ``${VAR:-default}`` for environment variables (keep secrets
out of the file). A relative ``cwd`` is relative to the file's directory.

``find_mcp_config()`` picks the file: the path given, else ``$LLAMON_MCP_CONFIG``, else
``./mcp.json``, else ``$LLAMON_HOME/mcp.json`` (``~/.llamon/mcp.json``). Any problem raises
``MCPConfigError`` (a ``ConfigValidationError``) naming the file and the key path
(``mcpServers.search.headers.Authorization``), never a value: env and header values are
secrets, URLs name hosts. A client whose request meets one sees ``INTERNAL_ERROR`` /
``mcp_config_invalid`` with the code's plain sentence; the full text is for the operator.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from llamon_agent._extras import requires_extra
from llamon_agent.core.classify import Classification, register_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.settings import MCP_CONFIG_ENV, home_directory, mcp_config_setting
from llamon_agent.exceptions import ConfigValidationError
from llamon_agent.mcp.arguments import json_type_name

with requires_extra("mcp", "llamon_agent.mcp"):
    from mcp.client.stdio import StdioServerParameters

__all__ = [
    "MCP_CONFIG_FILENAME",
    "MCPConfig",
    "MCPConfigError",
    "MCPServerConfig",
    "find_mcp_config",
    "load_mcp_config",
    "read_mcp_config",
]

MCP_CONFIG_FILENAME: Final = "mcp.json"

_STDIO_TYPES: Final = frozenset({"stdio"})
_HTTP_TYPES: Final = frozenset({"http", "streamable-http", "streamable_http", "streamableHttp"})
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class MCPConfigError(ConfigValidationError):
    """No ``mcp.json`` was found, or the one found is not a valid server list.

    The message names the file (or every place looked at) and the offending key path,
    never a configured value. Classified ``INTERNAL_ERROR`` / ``mcp_config_invalid``, not
    retriable, and its text is withheld from clients (it names local paths): fixing it is
    the operator's job, not the caller's.
    """


def _config_rule(exc: BaseException) -> Classification | None:
    if not isinstance(exc, MCPConfigError):
        return None
    return Classification(
        ErrorCode.INTERNAL_ERROR, "mcp_config_invalid", False, exc, expose_text=False
    )


register_exception(MCPConfigError, rule=_config_rule)


@dataclass(frozen=True, slots=True)
class MCPServerConfig:
    """One entry of ``mcpServers``: a stdio command or a streamable HTTP URL.

    Its ``repr`` shows the name and transport only (env and header values are secrets,
    a URL names a host).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: Path | None = field(default=None, repr=False)
    url: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def stdio_parameters(self) -> StdioServerParameters:
        """The stdio command as mcp's ``StdioServerParameters`` (``env`` is added to mcp's
        safe default environment)."""
        if self.command is None:
            raise ValueError(f"MCP server {self.name!r} is not a stdio server")
        return StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=self.cwd,
        )


@dataclass(frozen=True, slots=True)
class MCPConfig:
    """The servers of one ``mcp.json`` (disabled ones left out), in file order."""

    path: Path
    servers: tuple[MCPServerConfig, ...]

    def select(self, names: list[str] | tuple[str, ...]) -> MCPConfig:
        """Only the servers called ``names``; an unknown name is an ``MCPConfigError``."""
        known = {server.name: server for server in self.servers}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise MCPConfigError(
                f"{self.path}: no enabled server called {', '.join(map(repr, unknown))} "
                f"under mcpServers (there are: {', '.join(map(repr, known)) or 'none'})"
            )
        return MCPConfig(self.path, tuple(known[name] for name in names))


def find_mcp_config(path: str | os.PathLike[str] | None = None) -> Path:
    """The ``mcp.json`` to read: ``path``, else ``$LLAMON_MCP_CONFIG``, else
    ``./mcp.json``, else ``$LLAMON_HOME/mcp.json``.

    Raises ``MCPConfigError`` when ``path`` or ``$LLAMON_MCP_CONFIG`` names a file that
    does not exist, or when there is no file at all (naming every place looked at).
    """
    if path is not None:
        given = Path(path).expanduser()
        if not given.is_file():
            raise MCPConfigError(f"MCP server config {given} does not exist (or is not a file)")
        return given
    explicit = mcp_config_setting()
    if explicit is not None:
        if not explicit.is_file():
            raise MCPConfigError(
                f"{MCP_CONFIG_ENV} names {explicit}, which does not exist (or is not a file)"
            )
        return explicit
    looked: list[str] = [f"{MCP_CONFIG_ENV} (not set)"]
    for candidate in (Path.cwd() / MCP_CONFIG_FILENAME, home_directory() / MCP_CONFIG_FILENAME):
        if candidate.is_file():
            return candidate
        looked.append(str(candidate))
    raise MCPConfigError(
        "No MCP servers configured: MCPToolLoader() without a server reads an mcp.json "
        '({"mcpServers": {"<name>": {"command": ..., "args": [...]} or {"url": ...}}}) and '
        f"found none. Looked at: {'; '.join(looked)}. Create one of these files, set "
        f"{MCP_CONFIG_ENV}, or pass the server: MCPToolLoader('http://host:port/mcp')."
    )


def load_mcp_config(path: str | os.PathLike[str] | None = None) -> MCPConfig:
    """``read_mcp_config(find_mcp_config(path))``."""
    return read_mcp_config(find_mcp_config(path))


def read_mcp_config(path: str | os.PathLike[str]) -> MCPConfig:
    """Parse and check ``path``; ``${VAR}`` references are filled in from the environment.

    Raises ``MCPConfigError`` naming the file and the key path of the first problem.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise MCPConfigError(f"cannot read MCP server config {file}: {problem}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MCPConfigError(
            f"{file} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    return MCPConfig(file, _Reader(file).servers(document))


def _key(parent: str, name: str) -> str:
    return f"{parent}.{name}" if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f"{parent}[{name!r}]"


class _Reader:
    """Walks one document; every error names ``self.file`` and a key path."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def error(self, where: str, problem: str) -> MCPConfigError:
        return MCPConfigError(f"{self.file}: {where} {problem}")

    def servers(self, document: object) -> tuple[MCPServerConfig, ...]:
        if not isinstance(document, dict):
            found = json_type_name(document)
            raise self.error("the top level", f'must be an object with "mcpServers", not {found}')
        if "mcpServers" not in document:
            raise self.error("the top level", 'has no "mcpServers" object')
        entries = document["mcpServers"]
        if not isinstance(entries, dict):
            raise self.error("mcpServers", f"must be an object, not {json_type_name(entries)}")
        servers = [
            self.server(name, entry, _key("mcpServers", name)) for name, entry in entries.items()
        ]
        enabled = tuple(server for server in servers if server is not None)
        if not enabled:
            raise self.error("mcpServers", "lists no enabled server")
        return enabled

    def server(self, name: str, entry: object, where: str) -> MCPServerConfig | None:
        if not isinstance(entry, dict):
            raise self.error(where, f"must be an object, not {json_type_name(entry)}")
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            raise self.error(
                f"{where}.disabled", f"must be true or false, not {json_type_name(disabled)}"
            )
        if disabled:
            return None
        kind = entry.get("type")
        if kind is not None and not isinstance(kind, str):
            raise self.error(f"{where}.type", f"must be a string, not {json_type_name(kind)}")
        has_command, has_url = "command" in entry, "url" in entry
        if has_command == has_url:
            raise self.error(where, 'needs exactly one of "command" (stdio) or "url" (HTTP)')
        if kind is not None and kind not in (_STDIO_TYPES if has_command else _HTTP_TYPES):
            allowed = "stdio" if has_command else "http or streamable-http"
            raise self.error(
                f"{where}.type",
                f"must be {allowed} for a server with "
                f'"{"command" if has_command else "url"}" (llamon speaks stdio and '
                "streamable HTTP; SSE is not supported)",
            )
        if has_command:
            cwd = self.optional_string(entry, "cwd", where)
            return MCPServerConfig(
                name=name,
                command=self.string(entry["command"], f"{where}.command", non_empty=True),
                args=tuple(self.strings(entry.get("args", []), f"{where}.args")),
                env=self.table(entry["env"], f"{where}.env") if "env" in entry else None,
                cwd=(self.file.parent / cwd) if cwd is not None else None,
            )
        url = self.string(entry["url"], f"{where}.url", non_empty=True)
        if not url.startswith(("http://", "https://")):
            raise self.error(f"{where}.url", "must start with http:// or https://")
        return MCPServerConfig(
            name=name,
            url=url,
            headers=self.table(entry.get("headers", {}), f"{where}.headers"),
        )

    def optional_string(self, entry: dict[str, Any], key: str, where: str) -> str | None:
        return self.string(entry[key], f"{where}.{key}") if key in entry else None

    def string(self, value: object, where: str, *, non_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.error(where, f"must be a string, not {json_type_name(value)}")
        expanded = self.expand(value, where)
        if non_empty and not expanded.strip():
            raise self.error(where, "must not be empty")
        return expanded

    def strings(self, value: object, where: str) -> list[str]:
        if not isinstance(value, list):
            raise self.error(where, f"must be an array of strings, not {json_type_name(value)}")
        return [self.string(item, f"{where}[{index}]") for index, item in enumerate(value)]

    def table(self, value: object, where: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(where, f"must be an object of strings, not {json_type_name(value)}")
        return {key: self.string(item, _key(where, key)) for key, item in value.items()}

    def expand(self, value: str, where: str) -> str:
        def variable(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = os.environ.get(name)
            if found is not None:
                return found
            if default is not None:
                return default
            raise self.error(
                where, f"uses ${{{name}}}, but the environment variable {name} is not set"
            )

        return _VARIABLE.sub(variable, value)

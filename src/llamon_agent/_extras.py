"""Which extra to install for an optional feature, said the same way everywhere.

``pip install llamon-agent`` (the core) serves agents over A2A on SQLite or in memory,
with the error model, the tool loop and ``llamon demo``. The rest comes with an extra:

==============  =====================================  ========================================
extra           brings                                 for
==============  =====================================  ========================================
``langgraph``   LangGraph (+ its SQLite checkpointer)  ``llamon_agent.flow``, graph agents,
                                                       ``llamon_agent.loop.react`` / ``.langchain``
``mcp``         the MCP SDK                            ``llamon_agent.mcp``, the bookshop example
``openai``      the OpenAI SDK                         ``OpenAIChatModel``
``anthropic``   the Anthropic SDK                      ``AnthropicMessagesModel``
``postgres``    SQLAlchemy + asyncpg, psycopg (the     the ``postgres`` task store and flow
                LangGraph PostgreSQL checkpointer)     checkpoints
``jwt``         PyJWT (with its crypto backend)        signed push notifications
                                                       (``push_receiver(jwt_key=...)``)
``otel``        the OpenTelemetry SDK, prometheus-client  exporting spans and metrics, the
                                                       ``/metrics`` route (``metrics=True``)
``lab``         PyYAML                                 YAML Quality Lab case files
``redis``       redis-py                               relaying live task events across
                                                       replicas (``create_app(redis_url=)``)
``all``         every extra above
==============  =====================================  ========================================

Importing a feature whose extra is missing raises ``ImportError`` whose message names the
extra, e.g. ``llamon_agent.flow needs LangGraph: pip install 'llamon-agent[langgraph]'``;
an installed package too old for the feature (a name it does not have yet) gives
``... needs a newer version of LangGraph: pip install -U 'llamon-agent[langgraph]'``. The original
``ImportError`` is the ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, Literal

__all__ = ["EXTRA_MODULES", "Extra", "missing_extra", "requires_extra"]

Extra = Literal[
    "langgraph", "mcp", "openai", "anthropic", "postgres", "jwt", "otel", "lab", "redis"
]
"""The extras that bring an optional package (``all`` is their union)."""

_WHAT: Final[dict[Extra, str]] = {
    "langgraph": "LangGraph",
    "mcp": "the MCP SDK",
    "openai": "the OpenAI SDK",
    "anthropic": "the Anthropic SDK",
    "postgres": "the PostgreSQL drivers",
    "jwt": "PyJWT",
    "otel": "the OpenTelemetry SDK and prometheus-client",
    "lab": "PyYAML",
    "redis": "redis-py",
}

EXTRA_MODULES: Final[dict[Extra, tuple[str, ...]]] = {
    "langgraph": ("langgraph", "langchain_core"),
    "mcp": ("mcp",),
    "openai": ("openai",),
    "anthropic": ("anthropic",),
    "postgres": (
        "sqlalchemy",
        "asyncpg",
        "psycopg",
        "psycopg_pool",
        "langgraph.checkpoint.postgres",
    ),
    "jwt": ("jwt",),
    "otel": ("opentelemetry.sdk", "prometheus_client"),
    "lab": ("yaml",),
    "redis": ("redis",),
}
"""The modules each extra provides: an ``ImportError`` of one of them is that extra's."""


def _provided_by(module: str | None, extra: Extra) -> bool:
    if not module:
        return False
    return any(module == root or module.startswith(f"{root}.") for root in EXTRA_MODULES[extra])


def _failed_module(error: BaseException | None) -> ImportError | None:
    """The ``ImportError`` in ``error``'s chain that names a module (a library may re-raise
    a missing dependency as a bare ``ImportError`` of its own)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ImportError) and error.name:
            return error
        error = error.__cause__ or error.__context__
    return None


def missing_extra(extra: Extra, feature: str, cause: ImportError | None = None) -> ImportError:
    """The ``ImportError`` to raise when ``feature`` cannot load for want of ``extra``.

    ``cause`` is the import that failed: a missing module (or none given) says "needs X:
    pip install ...", any other import error (a name an old version lacks) "needs a newer
    version of X: pip install -U ...".
    """
    failed = _failed_module(cause)
    upgrade = failed is not None and not isinstance(failed, ModuleNotFoundError)
    what = f"a newer version of {_WHAT[extra]}" if upgrade else _WHAT[extra]
    command = "pip install -U" if upgrade else "pip install"
    error = ImportError(
        f"{feature} needs {what}: {command} 'llamon-agent[{extra}]'",
        name=failed.name if failed is not None else None,
    )
    error.__cause__ = cause
    return error


@contextmanager
def requires_extra(extra: Extra, feature: str) -> Iterator[None]:
    """Around the imports of an optional package: a failed import of one of ``extra``'s
    modules is raised as ``missing_extra(extra, feature, error)``; any other import error
    passes unchanged."""
    try:
        yield
    except ImportError as exc:
        failed = _failed_module(exc)
        if failed is None or not _provided_by(failed.name, extra):
            raise
        raise missing_extra(extra, feature, exc) from exc

"""Provider adapters implementing the ``Model`` protocol (``loop.model``).

* :class:`OpenAIChatModel` -- OpenAI Chat Completions with function calling, or any
  compatible server via ``base_url``;
* :class:`AnthropicMessagesModel` -- the Anthropic Messages API with tool use.

Both switch their SDK's retries off and retry themselves (``_retry``): 429, 5xx, timeouts
and connection errors, honouring ``Retry-After``, up to ``max_retries``; the answer's
``ModelResponse.retries`` says how many it took. A failure that outlives the retries is
raised as an exception the one table (``core.classify``) maps: ``httpx.HTTPStatusError``
(by status), ``httpx.TimeoutException`` or ``httpx.ConnectError``, with the SDK's error as
``__cause__``. See ``docs/models.md``.

Each adapter loads its SDK when first named (``pip install 'llamon-agent[openai]'`` /
``'llamon-agent[anthropic]'``), so one SDK missing or too old never breaks the other:
naming that adapter raises the ``ImportError`` that says what to install.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llamon_agent.loop.providers.anthropic import AnthropicMessagesModel
    from llamon_agent.loop.providers.openai import OpenAIChatModel

__all__ = ["AnthropicMessagesModel", "OpenAIChatModel"]

_MODULES = {
    "AnthropicMessagesModel": "llamon_agent.loop.providers.anthropic",
    "OpenAIChatModel": "llamon_agent.loop.providers.openai",
}


def __getattr__(name: str) -> Any:
    """Load an adapter's module (and its SDK) on first use."""
    if name in _MODULES:
        return getattr(import_module(_MODULES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

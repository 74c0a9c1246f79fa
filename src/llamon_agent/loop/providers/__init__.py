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
"""

from llamon_agent.loop.providers.anthropic import AnthropicMessagesModel
from llamon_agent.loop.providers.openai import OpenAIChatModel

__all__ = ["AnthropicMessagesModel", "OpenAIChatModel"]

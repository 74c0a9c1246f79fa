"""The demo agent, as a file to serve: ``llamon serve examples/demo_agent.py:agent``.

The agent lives in the package (``llamon_agent.examples.demo_agent``, what ``llamon demo``
serves); this file re-exports it for ``llamon serve examples/demo_agent.py:agent --card
examples/demo_agent.py:card``.
"""

from llamon_agent.examples.demo_agent import DemoAgent, agent, card

__all__ = ["DemoAgent", "agent", "card"]

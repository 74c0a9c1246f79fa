"""Project fixtures; ``stub_executor_run`` is re-exported as seed 000's tests import it."""

from llamon_agent.testing import stub_executor_run

__all__ = ["stub_executor_run"]

"""The checkpointer fixture of the flow tests (memory, SQLite, PostgreSQL)."""

from tests.flow.conftest import checkpointer

__all__ = ["checkpointer"]

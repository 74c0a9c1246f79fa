"""The store fixtures (every store kind; PostgreSQL in a schema of its own)."""

from tests._support.stores import postgres_dsn, postgres_schema, stores

__all__ = ["postgres_dsn", "postgres_schema", "stores"]

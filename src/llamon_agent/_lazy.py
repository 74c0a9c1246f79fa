"""Public names a package loads on first use, so importing the package stays cheap.

A package lists where each public name lives and hands the table to ``lazy_exports``::

    _HOMES = {"MCPToolLoader": "llamon_agent.mcp.loader", ...}
    __getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)

``package.Name`` and ``from package import Name`` import ``Name``'s module the first
time and keep the value in the package, so later reads cost a dict lookup; an unknown name
raises ``AttributeError`` as usual; ``dir(package)`` lists the public names, loaded or not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, loading ``homes[name]`` on use."""
    names = frozenset(public)

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def public_dir() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | names)

    return load, public_dir

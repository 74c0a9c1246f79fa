"""The loop tests' fixtures: a tool registry with recorded calls, a fake model provider."""

from tests.loop.conftest import calls, registry
from tests.loop.providers.conftest import _no_provider_env, fake, sleeper

__all__ = ["_no_provider_env", "calls", "fake", "registry", "sleeper"]

"""The browser fixture's own rule: no Chromium is a failure naming the fix, not a skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support.browser import chromium_executable


def test_a_missing_chromium_fails_naming_the_package(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install chromium"):
        chromium_executable("no-such-chromium-xyz", tmp_path / "chromium")


def test_the_system_chromium_is_found() -> None:
    assert Path(chromium_executable()).name.startswith("chromium")

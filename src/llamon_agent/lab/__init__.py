"""Quality Lab: case files that say how an agent must behave, checked before they run.

This release has the case format (``load_cases``, the shipped JSON Schema) and
``llamon lab check``; running cases is not yet available. See docs/quality-lab.md.
"""

from __future__ import annotations

from llamon_agent.lab.cases import Assertions, Case, CaseFileError, CaseProblem, load_cases

__all__ = ["Assertions", "Case", "CaseFileError", "CaseProblem", "load_cases"]

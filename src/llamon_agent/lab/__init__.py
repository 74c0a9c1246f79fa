"""Quality Lab: case files that say how an agent must behave -- which tool it selects,
how it may fail, that no server error escapes -- run against an agent in process or at a
URL, with faults injected through the SDK's own seams. See docs/quality-lab.md.

``load_cases`` reads case files; ``Lab`` runs them and returns a ``LabReport`` of
``CaseResult``\\s; ``llamon_agent.lab.reports`` writes JSON, JUnit XML and HTML reports.
"""

from __future__ import annotations

from llamon_agent.lab.cases import Assertions, Case, CaseFileError, CaseProblem, load_cases
from llamon_agent.lab.results import AssertionResult, CaseResult, LabReport, StepRecord
from llamon_agent.lab.runner import Lab, run_cases

__all__ = [
    "AssertionResult",
    "Assertions",
    "Case",
    "CaseFileError",
    "CaseProblem",
    "CaseResult",
    "Lab",
    "LabReport",
    "StepRecord",
    "load_cases",
    "run_cases",
]

"""Flows on LangGraph: ``GraphBuilder``, node kinds, failure context, HITL and streaming."""

from __future__ import annotations

from llamon_agent.flow.builder import END, START, GraphBuilder, node_kinds
from llamon_agent.flow.context import extract_flow_error_context

__all__ = ["END", "START", "GraphBuilder", "extract_flow_error_context", "node_kinds"]

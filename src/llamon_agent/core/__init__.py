"""The error model: codes, classification, error data, failure records, the security boundary.

Modules, in the order a failure travels through them:

* ``codes``      -- ``ErrorCode``, ``Stage``, the JSON-RPC code table
* ``classify``   -- the exception table: exception -> (code, reason, retriable)
* ``messages``   -- which exception text may leave the process (incident ids)
* ``error_data`` -- the wire payloads and their never-raising factories
* ``errors``     -- the public error API in one import, plus the raise helpers
* ``catalog``    -- the reason catalog (stage, retryable, operator action)
* ``failures``   -- ``FailureRecord``
* ``scrub``      -- the security boundary every message and evidence passes through
* ``hitl``       -- ``HITLInterrupt``
* ``flow_context`` -- ``FlowContext``: where a failed flow stopped
* ``events``     -- ``RunnerEvent`` (every runtime's events) and ``EventBus``
* ``settings``   -- every ``LLAMON_*`` environment variable, its default and its reader

``core`` imports no transport package (a2a-sdk, mcp, LangGraph, Starlette ...): the layers
above it (``loop``, ``flow``, ``mcp``, ``a2a``) import it, never the other way round.
"""

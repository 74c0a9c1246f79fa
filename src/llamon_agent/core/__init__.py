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
"""

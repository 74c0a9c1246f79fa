"""Tools, the registry that ties what the model sees to what runs, and per-run views.

Define a tool from a typed function; its JSON schema comes from the signature (pydantic)
and its description from the docstring::

    @tool
    def add_numbers(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    registry = ToolRegistry([add_numbers, search_orders])
    view = registry.view("add_numbers")        # only what this run needs
    outcome = await run_loop(model, view, "what is 2 + 3?")

What the caller sees:

* ``Tool.from_function`` / ``tool`` raise ``TypeError`` or ``ValueError`` at definition
  time for a function the loop could not call safely (``*args``, ``**kwargs``,
  positional-only parameters, a name providers reject). Sync functions run in a worker
  thread, so a blocking tool does not stall the server; async ones run on the loop.
* The schema forbids unknown fields (``additionalProperties: false``); the arguments are
  validated by the same pydantic model before the handler runs.
* ``ToolRegistry.register`` accepts a ``Tool``, a plain function, or any ``ToolLike``
  object (``name``, ``description``, ``parameters``, ``async call(arguments)``) such as
  the MCP loader's tools. Names are unique: registering a taken name raises ``ValueError``.
* A view is a frozen, ordered subset; a tool outside it is ``unknown_tool`` to the model.
  ``ToolView.of(tools)`` makes one from a view, a registry or an iterable of tools
  (``Tools``).
* A ``ToolLike`` that checks its own arguments says so with ``validates_arguments = True``
  (a ``SelfValidatingTool``, as the MCP tools are): the loop then leaves the check to it.
* A tool that changes something outside the run (books an order, sends a mail) says so
  with ``mutating=True`` (``@tool(mutating=True)``; any other ``ToolLike``: a
  ``mutating`` attribute that is ``True``, as MCP tools without ``readOnlyHint`` have).
  ``has_side_effects(tool)`` is the one reader: a Quality Lab case in plan mode, or
  without cleanup, does not run such a tool.
* Under a Quality Lab fault plan (``core.faults``) ``Tool.call`` fails the way a fault
  names (a timeout, a crash, a tool error, a slow answer) where the handler would run.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import (
    Any,
    Protocol,
    TypeAlias,
    assert_never,
    get_type_hints,
    overload,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.json_schema import GenerateJsonSchema

from llamon_agent.core.faults import (
    ToolFault,
    ToolRaises,
    ToolReturnsError,
    ToolSlow,
    ToolTimeout,
    active_faults,
)
from llamon_agent.loop.model import ToolSpec
from llamon_agent.loop.result import ToolResult
from llamon_agent.loop.validation import check_arguments, format_problems

__all__ = [
    "SelfValidatingTool",
    "Tool",
    "ToolHandler",
    "ToolLike",
    "ToolRegistry",
    "ToolSelector",
    "ToolView",
    "Tools",
    "has_side_effects",
    "tool",
]

ToolHandler: TypeAlias = Callable[..., Awaitable[Any]]
"""An async function called with the validated arguments as keyword arguments."""

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
"""MCP's tool-name alphabet. OpenAI and Anthropic accept ``[A-Za-z0-9_-]{1,64}``."""


@runtime_checkable
class ToolLike(Protocol):
    """Anything the loop can offer the model and call: a ``Tool``, an MCP tool, your own.

    ``call`` receives the parsed arguments (already checked against ``parameters``) and
    returns a ``ToolResult`` or a plain value (wrapped in ``ToolResult.ok``). Failures the
    model should see and act on are *returned* (``ToolResult.failure``). An exception
    raised by ``call`` is an escalation: the run ends with status ``tool_escalated`` and
    the exception reaches the caller (``LoopAgent`` re-raises it) -- how an MCP tool's
    third transport failure in one request ends the task. ``Tool.call`` never raises for
    its handler: a crash there is a ``tool_error`` observation.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    async def call(self, arguments: dict[str, Any]) -> ToolResult | Any: ...


@runtime_checkable
class SelfValidatingTool(Protocol):
    """What a ``ToolLike`` declares when its ``call`` checks its own arguments.

    With ``validates_arguments`` exactly ``True`` the loop does not check the arguments
    against ``parameters`` before ``call`` (the MCP tools, whose one-line
    ``Missing required argument: <field>`` is a contract, are not checked twice); any
    other value, or no such attribute, and the loop checks them first.
    """

    @property
    def validates_arguments(self) -> bool: ...


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"tool name must be 1-128 characters of A-Z a-z 0-9 _ . -, got {name!r} "
            "(OpenAI and Anthropic accept A-Z a-z 0-9 _ - up to 64)"
        )
    return name


class _NoTitles(GenerateJsonSchema):
    """Schemas without the generated ``title`` of every field: less noise for the model."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(schema_generator=_NoTitles)
    schema.pop("title", None)
    return schema


def _sync_handler(fn: Callable[..., Any]) -> ToolHandler:
    @functools.wraps(fn)
    async def run_in_thread(**kwargs: Any) -> Any:
        result = await asyncio.to_thread(functools.partial(fn, **kwargs))
        if inspect.isawaitable(result):
            result = await result
        return result

    return run_in_thread


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 -- an object with async __call__
    )


def _args_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an annotation that does not resolve
        raise TypeError(f"tool {name!r}: cannot resolve type hints ({exc})") from exc
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args / **kwargs cannot be described to a model")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {name!r}: positional-only parameter {param.name!r}")
        if param.name.startswith("_"):
            raise TypeError(f"tool {name!r}: parameter {param.name!r} starts with '_'")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    return model


def has_side_effects(tool: object) -> bool:
    """True for a tool that changes something outside the run: a ``Tool`` made with
    ``mutating=True``, or any other tool whose ``mutating`` attribute is ``True``.

    Everything that asks whether a tool may run in a plan-mode case reads it here.
    """
    return getattr(tool, "mutating", False) is True


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool: what the model sees (``name``, ``description``, ``parameters``) and its handler.

    ``handler`` is called with the validated arguments as keyword arguments. With an
    ``args_model`` the arguments are validated (and converted) by it; without one, they
    are checked against the ``parameters`` JSON schema. ``mutating`` says the handler
    changes something outside the run (see ``has_side_effects``).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    handler: ToolHandler = field(repr=False)
    args_model: type[BaseModel] | None = field(default=None, repr=False)
    mutating: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not _is_async(self.handler):
            object.__setattr__(self, "handler", _sync_handler(self.handler))

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mutating: bool = False,
    ) -> Tool:
        """A tool from a typed function (sync or async); see the module docstring.

        ``mutating=True``: the function changes something outside the run.
        """
        tool_name = _check_name(name or str(getattr(fn, "__name__", "")))
        model = _args_model(fn, tool_name)
        doc = description if description is not None else inspect.getdoc(fn)
        return cls(
            name=tool_name,
            description=(doc or "").strip(),
            parameters=_schema_of(model),
            handler=fn if _is_async(fn) else _sync_handler(fn),
            args_model=model,
            mutating=mutating,
        )

    def spec(self) -> ToolSpec:
        """What the model sees of this tool."""
        return ToolSpec(self.name, self.description, self.parameters)

    async def call(self, arguments: dict[str, Any]) -> ToolResult | Any:
        """Validate ``arguments`` and run the handler.

        Arguments that break the contract give ``ToolResult.failure("invalid_arguments")``
        naming the fields; an exception raised by the handler (or a validator) gives the
        ``tool_error`` result of ``ToolResult.from_exception``. Never raises (but for
        cancellation).

        Under a fault plan (``core.faults.fault_scope``) that names this tool, the handler
        fails as the fault says, after the arguments are checked: ``tool_timeout`` as a
        handler raising ``TimeoutError``, ``tool_raises`` as one raising
        ``RuntimeError(message)`` (the text stays in the server log), both not running the
        handler; ``tool_error`` returns ``ToolResult.failure("tool_error", message)``;
        ``tool_slow`` runs the handler ``delay_ms`` late.
        """
        try:
            values, problems = check_arguments(self, arguments)
            if problems:
                return ToolResult.failure("invalid_arguments", format_problems(problems))
        except Exception as exc:
            return ToolResult.from_exception(exc, tool=self.name)
        return await self.call_checked(values)

    async def call_checked(self, values: dict[str, Any]) -> ToolResult | Any:
        """``call`` for arguments ``check_arguments`` already passed: ``values`` are what it
        returned for them (the handler's keyword arguments). The rest is ``call``'s: the
        fault plan, the handler, its exception as a ``tool_error`` result. Never raises
        (but for cancellation)."""
        try:
            plan = active_faults()
            if plan is not None:
                fault = plan.for_tool(self.name)
                if fault is not None:
                    return await self._faulted(fault, values)
            return await self.handler(**values)
        except Exception as exc:
            return ToolResult.from_exception(exc, tool=self.name)

    async def _faulted(self, fault: ToolFault, values: dict[str, Any]) -> ToolResult | Any:
        """The handler's run, as ``fault`` makes it fail (see ``call``)."""
        if isinstance(fault, ToolTimeout):
            raise TimeoutError  # as asyncio.timeout raises it: no text
        if isinstance(fault, ToolRaises):
            raise RuntimeError(fault.message)
        if isinstance(fault, ToolReturnsError):
            return ToolResult.failure("tool_error", fault.message)
        if isinstance(fault, ToolSlow):
            await asyncio.sleep(fault.delay_ms / 1000)
            return await self.handler(**values)
        assert_never(fault)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, mutating: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    mutating: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., description=..., mutating=...)`` makes a
    ``Tool``."""
    if fn is not None:
        return Tool.from_function(fn, name=name, description=description, mutating=mutating)

    def decorate(function: Callable[..., Any]) -> Tool:
        return Tool.from_function(function, name=name, description=description, mutating=mutating)

    return decorate


ToolSelector: TypeAlias = str | Callable[[ToolLike], bool]
"""A tool name, or a predicate over tools, for ``view``."""


def _as_tool(item: ToolLike | Callable[..., Any]) -> ToolLike:
    if isinstance(item, Tool | ToolLike):
        return item
    if callable(item):
        return Tool.from_function(item)
    raise TypeError(
        f"cannot register {type(item).__name__!r}: expected a Tool, a function, or an object "
        "with name, description, parameters and async call(arguments)"
    )


class _ToolSet:
    """Read access shared by the registry and its views."""

    _tools: dict[str, ToolLike]

    def get(self, name: str) -> ToolLike | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names, in registration order."""
        return tuple(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model sees: one ``ToolSpec`` per tool, in order."""
        return tuple(ToolSpec(t.name, t.description, t.parameters) for t in self._tools.values())

    def view(self, *selectors: ToolSelector) -> ToolView:
        """A frozen view of some tools: by names (``view("a", "b")``), by a predicate
        (``view(lambda t: t.name.startswith("read_"))``), or all (``view()``).

        An unknown name raises ``KeyError``: a typo in a view fails where it is written.
        """
        if not selectors:
            return ToolView(self._tools.values())
        if len(selectors) == 1 and callable(selectors[0]):
            predicate = selectors[0]
            return ToolView(t for t in self._tools.values() if predicate(t))
        if not all(isinstance(s, str) for s in selectors):
            raise TypeError("view() takes tool names, or a single predicate")
        missing = [s for s in selectors if s not in self._tools]
        if missing:
            raise KeyError(f"no tool named {', '.join(map(repr, missing))}; have {self.names}")
        wanted = set(selectors)
        return ToolView(t for t in self._tools.values() if t.name in wanted)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolLike]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)


class ToolView(_ToolSet):
    """The tools one run may use: what the loop gets. Frozen once made.

    The model is offered exactly these tools; a call to any other name is ``unknown_tool``.
    """

    def __init__(self, tools: Iterable[ToolLike] = ()) -> None:
        self._tools = {}
        for item in tools:
            if item.name in self._tools:
                raise ValueError(f"duplicate tool name {item.name!r} in a view")
            self._tools[item.name] = item

    @classmethod
    def of(cls, tools: Tools) -> ToolView:
        """The view of ``tools``: a view as it is, a registry's view of all its tools as
        they are now, or the tools of an iterable (functions made ``Tool``\\s; a name
        twice raises ``ValueError``)."""
        if isinstance(tools, ToolView):
            return tools
        if isinstance(tools, ToolRegistry):
            return tools.view()
        return ToolRegistry(tools).view()

    def __repr__(self) -> str:
        return f"ToolView({list(self._tools)!r})"


class ToolRegistry(_ToolSet):
    """Every tool an application has, by unique name; hand the loop a ``view`` of it."""

    def __init__(self, tools: Iterable[ToolLike | Callable[..., Any]] = ()) -> None:
        self._tools = {}
        for item in tools:
            self.register(item)

    def register(self, item: ToolLike | Callable[..., Any]) -> ToolLike:
        """Add a ``Tool``, a function (made a ``Tool``) or a ``ToolLike``; returns the tool.

        Usable as a decorator. A name already registered raises ``ValueError``.
        """
        found = _as_tool(item)
        _check_name(found.name)
        if found.name in self._tools:
            raise ValueError(f"a tool named {found.name!r} is already registered")
        self._tools[found.name] = found
        return found

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"


Tools: TypeAlias = ToolView | ToolRegistry | Iterable[ToolLike | Callable[..., Any]]
"""A view, a registry (all of its tools as they are when used), or tools to register."""

"""The console's routes: pages, htmx partials, sign-in, and the static files.

Every page is HTML rendered by Jinja2 with autoescaping on (whatever a task, a failure or
an event holds is shown as text). Every answer carries ``Content-Security-Policy``
(scripts, styles, images and requests from this origin only: no inline script, no inline
style), ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and
``X-Content-Type-Options: nosniff``; pages also ``Cache-Control: no-store``. Static files
are cached (``max-age`` a day, with an ``ETag``).

A request the console does not let in (``access``) gets a redirect to the sign-in page
when it asks for HTML, else 401 (htmx requests also get ``HX-Redirect``; a console
without credentials reached other than on loopback: 403). A parameter the page cannot use
is a 400 page naming it; an unknown task a 404 page.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any, Final
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from llamon_agent.a2a.console.access import ConsoleAccess
from llamon_agent.a2a.console.options import CONSOLE_PATH, ConsoleOptions
from llamon_agent.a2a.console.reading import (
    SINCE_CHOICES,
    BadParameter,
    ConsoleSources,
    failure_filter,
    failures_view,
    live_view,
    moment_text,
    pretty_json,
    task_view,
)
from llamon_agent.a2a.console.session import COOKIE_NAME
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import error_data_for_exception

__all__ = ["SECURITY_HEADERS", "console_routes"]

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
"""Headers on every console answer."""
_STATIC: Final = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "htmx-LICENSE.txt": "text/plain; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_MAX_FORM: Final = 8192
_NEXT: Final = re.compile(r"^/console(?:/[A-Za-z0-9_\-.~/]*)?(?:\?[A-Za-z0-9_\-.~=&%+:]*)?$")

Handler = Callable[[Request], Awaitable[Response]]


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("llamon_agent.a2a.console", "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["moment"] = moment_text
    environment.filters["pretty"] = pretty_json
    return environment


def _secured(response: Response, *, page: bool = True) -> Response:
    response.headers.update(SECURITY_HEADERS)
    if page:
        response.headers["Cache-Control"] = "no-store"
    return response


def _static_files() -> dict[str, tuple[bytes, str]]:
    folder = files("llamon_agent.a2a.console").joinpath("static")
    loaded: dict[str, tuple[bytes, str]] = {}
    for name in _STATIC:
        body = folder.joinpath(name).read_bytes()
        loaded[name] = (body, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')
    return loaded


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if value and _NEXT.fullmatch(value) and "//" not in value and ".." not in value:
        return value
    return CONSOLE_PATH


def console_routes(
    sources: ConsoleSources, access: ConsoleAccess, options: ConsoleOptions
) -> list[BaseRoute]:
    """The console's routes, under ``CONSOLE_PATH``; they check their own access."""
    templates = _environment()
    statics = _static_files()
    refresh = options.refresh_seconds

    def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("signed_in", access.needs_sign_in)
        context.setdefault("refresh", refresh)
        body = templates.get_template(name).render(**context)
        response = HTMLResponse(body, status_code=status)
        response.headers["Vary"] = "HX-Request, Cookie"
        return _secured(response)

    def refused(request: Request) -> Response:
        if not access.needs_sign_in:
            return render(request, "refused.html", 403, signed_in=False)
        wants_html = "text/html" in request.headers.get("accept", "")
        target = f"{CONSOLE_PATH}/login?next=" + quote(
            request.url.path + (f"?{request.url.query}" if request.url.query else ""), safe=""
        )
        if request.headers.get("hx-request"):
            response: Response = PlainTextResponse("sign in to the console", status_code=401)
            response.headers["HX-Redirect"] = target
            return _secured(response)
        if wants_html and request.method == "GET":
            return _secured(RedirectResponse(target, status_code=303))
        return _secured(PlainTextResponse("sign in to the console", status_code=401))

    def guarded(handler: Handler) -> Handler:
        async def checked(request: Request) -> Response:
            if access.caller(request) is None:
                return refused(request)
            try:
                return await handler(request)
            except Exception as exc:  # the store failed: a page saying so, never a trace
                return unavailable(request, exc)

        return checked

    def unavailable(request: Request, exc: Exception) -> Response:
        """A page that could not be read: the failure's errorCode and reason (and incident
        id for an unexpected exception, logged with its traceback), 503 when trying again
        may help (a store outage), else 500."""
        data = error_data_for_exception(exc)
        wire = data.to_wire()
        status = 503 if data.retriable else 500
        parts = [f"The console could not read the store: {wire['errorCode']}"]
        parts.append(f"({wire['errorReason']})")
        if wire.get("incidentId"):
            parts.append(f"incident {wire['incidentId']}")
        return render(
            request,
            "problem.html",
            status,
            title="Store unavailable" if data.retriable else "Console error",
            parameter="",
            message=" ".join(parts) + ("; try again shortly." if data.retriable else "."),
        )

    def bad(request: Request, problem: BadParameter) -> Response:
        return render(
            request,
            "problem.html",
            400,
            title="Bad parameter",
            parameter=problem.parameter,
            message=str(problem),
        )

    async def live_page(request: Request) -> Response:
        return render(request, "live.html", tasks=await live_view(sources.task_store))

    async def live_rows(request: Request) -> Response:
        return render(request, "live_rows.html", tasks=await live_view(sources.task_store))

    async def failures_page(request: Request) -> Response:
        try:
            chosen = failure_filter(request.query_params)
        except BadParameter as problem:
            return bad(request, problem)
        view = await failures_view(sources.failures, chosen)
        partial = bool(request.headers.get("hx-request"))
        return render(
            request,
            "failures_body.html" if partial else "failures.html",
            view=view,
            chosen=chosen,
            codes=[code.value for code in ErrorCode],
            ranges=SINCE_CHOICES,
        )

    async def task_page(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        view = await task_view(sources, task_id)
        if view is None:
            return render(
                request,
                "problem.html",
                404,
                title="No such task",
                parameter="task",
                message="No task with this id is kept in this store.",
            )
        return render(request, "task.html", view=view, events_kept=sources.events is not None)

    async def login_page(request: Request) -> Response:
        if not access.needs_sign_in or access.caller(request) is not None:
            return _secured(RedirectResponse(CONSOLE_PATH, status_code=303))
        return render(
            request,
            "login.html",
            next=_safe_next(request.query_params.get("next")),
            header=access.auth.header if access.auth else "",
            signed_in=False,
            refused=False,
        )

    async def login(request: Request) -> Response:
        if not access.needs_sign_in:
            return _secured(RedirectResponse(CONSOLE_PATH, status_code=303))
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM:
                return _secured(PlainTextResponse("form too large", status_code=413))
        form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
        credential = (form.get("credential") or [""])[0]
        target = _safe_next((form.get("next") or [""])[0])
        caller = access.sign_in(credential)
        if caller is None:
            return render(
                request,
                "login.html",
                401,
                next=target,
                signed_in=False,
                refused=True,
                header=access.auth.header if access.auth else "",
            )
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE_NAME,
            access.session_cookie(caller),
            max_age=int(access.lifetime),
            path=CONSOLE_PATH,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return _secured(response)

    async def logout(request: Request) -> Response:
        response = RedirectResponse(f"{CONSOLE_PATH}/login", status_code=303)
        response.delete_cookie(
            COOKIE_NAME,
            path=CONSOLE_PATH,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return _secured(response)

    async def static(request: Request) -> Response:
        found = statics.get(request.path_params["name"])
        if found is None:
            return _secured(PlainTextResponse("not found", status_code=404))
        body, etag = found
        headers = {"ETag": etag, "Cache-Control": "public, max-age=86400"}
        if request.headers.get("if-none-match") == etag:
            return _secured(Response(status_code=304, headers=headers), page=False)
        media = _STATIC[request.path_params["name"]]
        return _secured(Response(body, media_type=media, headers=headers), page=False)

    base = CONSOLE_PATH
    return [
        Route(base, guarded(live_page), methods=["GET"]),
        Route(f"{base}/", guarded(live_page), methods=["GET"]),
        Route(f"{base}/live", guarded(live_rows), methods=["GET"]),
        Route(f"{base}/failures", guarded(failures_page), methods=["GET"]),
        Route(f"{base}/tasks/{{task_id}}", guarded(task_page), methods=["GET"]),
        Route(f"{base}/login", login_page, methods=["GET"]),
        Route(f"{base}/login", login, methods=["POST"]),
        Route(f"{base}/logout", logout, methods=["POST"]),
        Route(f"{base}/static/{{name}}", static, methods=["GET"]),
    ]

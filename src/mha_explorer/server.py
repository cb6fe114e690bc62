"""The HTTP way out: routes translate requests into calls of the core, nothing more."""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from .examples import load_teaching_example
from .lab import LabError, lab_payload
from .schema import TracePayload, TraceRequest, trace_payload
from .trace import trace

WEB = files(__package__).joinpath("web")

SECURITY_HEADERS = {
    # only the page's own files: no inline script, nothing from another origin
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class SecurityHeaders:
    """Pure ASGI middleware: adds SECURITY_HEADERS to every HTTP response without buffering the body."""

    def __init__(self, app):
        self.app = app
        self.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def teaching_payload(encoding: str = "json") -> TracePayload:
    example = load_teaching_example()
    t = trace(example.x, example.weights, example.config)
    return trace_payload(t, list(example.tokens), example.weights, example.tokens.index(example.query), encoding)


def explain(error: dict) -> dict:
    """One pydantic error as {field, message}: where it is and what to change."""
    field = ".".join(str(p) for p in error["loc"] if p != "body") or "body"
    ctx = error.get("ctx") or {}
    given = error.get("input")
    kind = error["type"]
    if kind == "less_than_equal":
        message = f"{given!r} is more than the limit of {ctx['le']}; use at most {ctx['le']}"
    elif kind == "greater_than_equal":
        message = f"{given!r} is less than {ctx['ge']}; use at least {ctx['ge']}"
    elif kind in ("too_long", "string_too_long"):
        what = "characters" if isinstance(given, str) else "entries"
        message = f"has {len(given) if isinstance(given, (str, list)) else ctx.get('actual_length')} {what}; the limit is {ctx['max_length']}"
    elif kind in ("too_short", "string_too_short"):
        message = f"is empty; give at least {ctx['min_length']}"
    elif kind == "finite_number":
        message = "must be a finite number: no NaN or infinity"
    elif kind in ("float_parsing", "float_type", "int_parsing", "int_type", "int_from_float"):
        message = f"{given!r} is not a {'whole ' if kind.startswith('int') else ''}number; type a number such as 0.5"
    elif kind == "missing":
        message = "is required"
    elif kind == "extra_forbidden":
        message = "is not a field of this request; remove it"
    else:
        message = f"{error['msg']}; send a JSON body matching the schema at /docs" if kind == "json_invalid" else error["msg"]
    return {"field": field, "message": message, "type": kind}


def create_app() -> FastAPI:
    app = FastAPI(title="mha-explorer", version="0.1.0")
    example = teaching_payload()  # computed once: the example never changes

    app.add_middleware(SecurityHeaders)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(str(WEB.joinpath("index.html")), media_type="text/html")

    @app.get("/api/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/example", response_model=TracePayload)
    def teaching_example(encoding: Literal["json", "base64"] = "json") -> Response:
        return Response(example_json[encoding], media_type="application/json")

    @app.post(
        "/api/trace",
        response_model=TracePayload,
        responses={422: {"description": "a field is out of range or inconsistent; `detail` names it and the fix"}},
    )
    def lab_trace(request: TraceRequest) -> Response:
        return Response(lab_payload(request).model_dump_json(), media_type="application/json")

    @app.exception_handler(LabError)
    async def lab_error(request: Request, error: LabError) -> JSONResponse:
        return JSONResponse({"detail": [{"field": error.field, "message": error.message}]}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": [explain(e) for e in error.errors()]}, status_code=422)

    example_json = {
        "json": example.model_dump_json(),
        "base64": teaching_payload("base64").model_dump_json(),
    }
    app.mount("/static", StaticFiles(directory=str(WEB)), name="static")
    return app

"""The HTTP way out: routes translate requests into calls of the core, nothing more."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from .examples import load_teaching_example
from .schema import TracePayload, trace_payload
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


def teaching_payload() -> TracePayload:
    example = load_teaching_example()
    t = trace(example.x, example.weights, example.config)
    return trace_payload(t, list(example.tokens), example.weights, query=example.tokens.index(example.query))


def create_app() -> FastAPI:
    app = FastAPI(title="mha-explorer", version="0.1.0")
    example = teaching_payload()  # computed once: the example never changes

    @app.middleware("http")
    async def harden(request: Request, call_next):
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(str(WEB.joinpath("index.html")), media_type="text/html")

    @app.get("/api/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/example", response_model=TracePayload)
    def teaching_example() -> JSONResponse:
        return JSONResponse(example_json)

    example_json = example.model_dump(mode="json")
    app.mount("/static", StaticFiles(directory=str(WEB)), name="static")
    return app

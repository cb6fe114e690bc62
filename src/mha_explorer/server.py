"""The HTTP way out: routes translate requests into calls of the core, nothing more."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import struct
import time
import zlib
from importlib.resources import files
from typing import Literal

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware
from starlette.exceptions import HTTPException as StarletteHTTPException
from pydantic import BaseModel, ConfigDict, Field, field_validator

from . import __version__, parallel
from .lab import LabError, field_name, lab_inputs, lab_payload
from .models.errors import CheckpointError, ModelError
from .modelview import GONE, MAX_TEXT, SAVED_AGAIN, HeadArrays, LayerWeights, ModelService, check_request, head_arrays, layer_weights, model_payload
from .schema import BINARY_MEDIA_TYPE, NOT_FINITE, Packer, TracePayload, TraceRequest, teaching_payload

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
}
# where the browser takes it: a page over HTTPS or on this machine. Over plain HTTP from another
# machine Chromium ignores it and says so in the console, as an error, on every load.
OPENER_POLICY = (b"cross-origin-opener-policy", b"same-origin")


NO_BODY = "this route takes no body: send none (the model is named in the path)"  # the load route's answer to one
MAX_BODY = 1_000_000  # bytes: the page's lab requests send a seed and the edited cells, never whole arrays
access_log = logging.getLogger("mha_explorer.access")
error_log = logging.getLogger("mha_explorer.errors")


class Problem(BaseModel):
    field: str
    message: str
    type: str | None = None


class ErrorResponse(BaseModel):
    """Every error answer: which field is wrong, and what to change."""

    detail: list[Problem]


ERRORS = {
    400: {"model": ErrorResponse, "description": "the body could not be parsed at all (such as JSON nested too deeply)"},
    413: {"model": ErrorResponse, "description": "the request body is over the limit"},
    415: {"model": ErrorResponse, "description": "the body is sent as another type than JSON: send Content-Type: application/json"},
    422: {
        "model": ErrorResponse,
        "description": "the body is not valid JSON (`detail` says where it breaks), or a field is missing, of the wrong type, "
        "out of range or inconsistent (`detail` names it and the fix)",
    },
    503: {"model": ErrorResponse, "description": "too many traces under way; retry after the Retry-After seconds"},
}
# a route that reads no body: only the parameters of its address can be wrong
ADDRESS_ERRORS = {422: {"model": ErrorResponse, "description": "a parameter of the address that the route does not take, or one out of its values (`detail` names it)"}}


def problem(status: int, field: str, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": [{"field": field, "message": message}]}, status_code=status, headers=headers)


def page_file(path: str) -> bool:
    """Whether the path is one of the page's own files: the page, its scripts and styles."""
    return path == "/" or path.startswith("/static/")


class BodyTooLarge(Exception):
    pass


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})


class Guard:
    """Pure ASGI middleware around everything: caps request bodies, adds the security headers to
    every response without buffering it, and writes one JSON log line per request. It refuses a
    POST sent by another site's page (its Origin is not this host: a form or script there could
    make the server load and trace), and, given `hosts`, a request for any other host name (a
    site whose name is made to resolve to 127.0.0.1 would otherwise reach a loopback server)."""

    def __init__(self, app, max_body: int = MAX_BODY, hosts: frozenset[str] | None = None):
        self.app = app
        self.max_body = max_body
        self.hosts = hosts
        self.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]

    def refusal(self, scope, headers: dict[bytes, bytes], name: str) -> JSONResponse | None:
        """name: the Host header's name, its port left out."""
        host = headers.get(b"host", b"").decode("latin-1")
        if self.hosts is not None and name not in self.hosts:
            return problem(403, "host", f"this server answers for {', '.join(sorted(self.hosts))} only, not {host[:80]!r}: open it at one of those names")
        origin = headers.get(b"origin")
        if scope["method"] == "POST" and origin is not None and origin.decode("latin-1").split("://", 1)[-1].lower() != host.lower():
            return problem(403, "origin", "a request from another site's page is refused: use the explorer's own page, or a client that sends no Origin")
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        state = {"status": 500, "sent": False}

        # HEAD on the API is its GET without the body (the page and / answer HEAD themselves); the
        # log, and a refusal of the method, name the HEAD asked for
        method = scope["method"]
        head = method == "HEAD" and scope["path"].startswith("/api/")
        if head:
            scope = {**scope, "method": "GET", "asked_method": "HEAD"}

        # the page's own files are checked again on every load (a 304 when unchanged), so that a
        # page from before an upgrade never runs against the new server
        static = page_file(scope["path"])

        headers = dict(scope["headers"])
        name = re.sub(r":[0-9]+$", "", headers.get(b"host", b"").decode("latin-1")).lower()
        trusted = scope.get("scheme") == "https" or name in LOOPBACK_NAMES or name.startswith("127.")
        extra = [*([(b"cache-control", b"no-cache")] if static else []), *([OPENER_POLICY] if trusted else [])]

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                state["status"], state["sent"] = message["status"], True
                message["headers"] = [*message.get("headers", []), *self.headers, *extra]
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            refused = self.refusal(scope, headers, name)
            if refused is not None:
                return await refused(scope, receive, send_with_headers)
            length = headers.get(b"content-length", b"0")
            if length.isdigit() and int(length) > self.max_body:
                raise BodyTooLarge
            # read the whole body first, so a stream without a length is cut at the limit too
            body, more = b"", scope["method"] in ("POST", "PUT", "PATCH")
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    state["status"] = 499  # logged as the client closing the request, not as a fault
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_body:
                    raise BodyTooLarge
            kind = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
            takes_none = scope["method"] == "POST" and re.fullmatch(r"/api/models/[^/]+/load", scope["path"])
            if takes_none and not _empty_body(body):  # of any type, as nothing it would not use is taken in silence
                return await problem(422, "body", NO_BODY)(scope, receive, send_with_headers)
            if body and not takes_none and scope["path"].startswith("/api/") and kind and not re.fullmatch(r"application/([a-z0-9.+-]+\+)?json", kind):
                message = f"the body is sent as {kind[:60]}; send a JSON object, with Content-Type: application/json (/openapi.json lists its fields)"
                return await problem(415, "content-type", message)(scope, receive, send_with_headers)
            replayed = False

            async def replay():
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send_with_headers)
        except BodyTooLarge:
            if not state["sent"]:
                if scope["path"].startswith("/api/model-"):  # what a real model is sent: a text (and a few numbers)
                    field, message = "text", f"the request is larger than the server reads (over {self.max_body:,} bytes); a model's text may be at most {MAX_TEXT:,} characters"
                else:
                    field, message = "body", f"the request body is over the limit of {self.max_body:,} bytes; send less (for the lab: a seed and the edited values, not whole arrays)"
                await problem(413, field, message)(scope, receive, send_with_headers)
        except Exception:  # a fault of the server's own: said in the same shape, with the same headers
            error_log.exception("%s %s failed", method, scope["path"])
            if not state["sent"]:
                message = "the server failed on this request (a fault of its own, logged where it runs); try another request, or report it"
                await problem(500, "server", message)(scope, receive, send_with_headers)
        finally:
            access_log.info(
                json.dumps(
                    {
                        "method": method,
                        "path": scope["path"],
                        "status": state["status"],
                        "ms": round(1000 * (time.perf_counter() - started), 2),
                    }
                )
            )


class Busy(Exception):
    pass


class Refused(Exception):
    """A request refused with its own status (not 422): said as every error is."""

    def __init__(self, status: int, field: str, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


NO_SUCH_MODEL = {404: {"model": ErrorResponse, "description": "no model of that name: the message lists the names there are"}}
NOT_INSTALLED = {409: {"model": ErrorResponse, "description": "the model's package is not installed: the message gives the command"}}


class TraceGate:
    """A bounded queue for heavy traces: `workers` run at once, `queue` more may wait, the rest get 503."""

    def __init__(self, workers: int = 2, queue: int = 16):
        self.slots = asyncio.Semaphore(workers)
        self.limit = workers + queue
        self.pending = 0

    def busy(self) -> bool:
        """A trace sent now would wait for a slot, or be turned away."""
        return self.slots.locked() or self.pending >= self.limit

    async def run(self, fn, *args):
        if self.pending >= self.limit:
            raise Busy
        self.pending += 1
        try:
            async with self.slots:
                return await run_in_threadpool(fn, *args)
        finally:
            self.pending -= 1


def known_parameters(request: Request) -> None:
    """A parameter of an API address the route does not take is refused, not ignored: a POST
    sent with ?encoding=binary would otherwise get JSON, with no word of why."""
    if not request.url.path.startswith("/api/") or request.url.path == "/api/health":  # the page and a probe take whatever is added (?utm=…)
        return
    dependant = getattr(request.scope.get("route"), "dependant", None)
    known = {p.alias for p in dependant.query_params} if dependant else set()
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        has_body = bool(dependant and dependant.body_params)
        fix = "send it as a field of the JSON body" if request.method == "POST" and has_body else "remove it"
        takes = f" (it takes {', '.join(sorted(known))})" if known else ""
        raise LabError(f"url.{field_name(unknown[0])}", f"{shown_json(unknown[0])} is not a parameter of this address{takes}; {fix}")


def explain(error: dict, request_model: type[BaseModel] | None = None) -> dict:
    """One pydantic error as {field, message}: where it is and what to change."""
    path = [p for p in error["loc"] if p != "body"]
    if error["loc"][:1] == ("query",):  # a parameter of the address (?encoding=): not the body's "query" field
        path = ["url", *path[1:]]
    ctx = error.get("ctx") or {}
    given = error.get("input")
    shown = shown_json(given)
    kind = error["type"]
    if kind == "json_invalid":  # the loc holds where the JSON breaks, not a field
        path, at = [], error["loc"][-1]
        where = f" at character {at + 1}" if isinstance(at, int) else ""
        message = f"the body is not valid JSON: {ctx.get('error')}{where}; send a JSON object as /openapi.json describes"
    elif kind in ("model_attributes_type", "model_type", "dict_type", "missing") and not path:
        message = "send the request as a JSON object, with Content-Type: application/json (/openapi.json lists its fields)"
    elif kind in ("model_attributes_type", "model_type", "dict_type"):
        message = f"{shown} is not an object; send a JSON object, in curly braces"
    elif kind == "less_than_equal":
        message = f"{shown} is more than the limit of {ctx['le']}; use at most {ctx['le']}"
    elif kind == "greater_than_equal":
        message = f"{shown} is less than {ctx['ge']}; use at least {ctx['ge']}"
    elif kind in ("too_long", "string_too_long"):
        what = "characters" if isinstance(given, str) else "entries"
        message = f"has {len(given) if isinstance(given, (str, list)) else ctx.get('actual_length')} {what}; the limit is {ctx['max_length']}"
    elif kind in ("too_short", "string_too_short"):
        what = "character" if isinstance(given, str) else "entry"
        message = f"is empty; give at least {ctx['min_length']} {what}"
    elif kind == "string_type":
        message = f"{shown} is not text; send a JSON string, in double quotes"
    elif kind == "string_unicode":
        message = "is not valid Unicode text (a lone surrogate such as \\ud800); send UTF-8 text"
    elif kind == "finite_number":
        message = f"must be {NOT_FINITE}"
    elif kind in ("int_type", "int_parsing", "int_parsing_size", "int_from_float") and isinstance(given, float) and given.is_integer():
        limits = field_limits(request_model, path)  # a whole number past the range is said to be past it first
        if "le" in limits and given > limits["le"]:
            message = f"{shown} is more than the limit of {limits['le']}; send {whole_number_wanted(request_model, path)}"
        elif "ge" in limits and given < limits["ge"]:
            message = f"{shown} is less than {limits['ge']}; send {whole_number_wanted(request_model, path)}"
        else:
            message = f"{shown} is a whole number written as a decimal; send it without a point or an exponent, as {whole_number_wanted(request_model, path)}"
    elif kind in ("int_type", "int_parsing", "int_parsing_size", "int_from_float"):
        message = f"{shown} is not a whole number; send {whole_number_wanted(request_model, path)}"
    elif kind in ("float_type", "float_parsing") and isinstance(given, int) and not isinstance(given, bool):
        message = "is a whole number past the largest float64 (about 1.8e308); send a smaller one"
    elif kind in ("float_type", "float_parsing"):
        message = f"{shown} is not a number; send a JSON number such as 0.5"
    elif kind in ("bool_type", "bool_parsing"):
        message = f"{shown} is not true or false; send JSON true or false, without quotes"
    elif kind == "list_type":
        message = f"{shown} is not a list; send a JSON array, in square brackets"
    elif kind == "literal_error":
        message = f"{shown} is not allowed; use {ctx.get('expected')}"
    elif kind == "missing":
        message = "is required; add it (/openapi.json describes it)"
    elif kind == "extra_forbidden":
        message = "is not a field of this request; remove it"
    else:
        message = error["msg"]
    return {"field": ".".join(field_name(p) for p in path) or "body", "message": message, "type": kind}


def shown_json(value, longest: int = 60) -> str:
    """A value as the client wrote it in JSON: "four", true, 1e+30; its middle cut out past
    `longest` characters (a megabyte of text is not sent back)."""
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    size = len(value) if isinstance(value, str) else len(shown)  # a text's own characters, not its JSON's quotes and escapes
    return shown if len(shown) <= longest else f"{shown[: longest - 20]}…{shown[-12:]} ({size:,} characters)"


def _empty_body(body: bytes) -> bool:
    """No body, or one that says nothing: {} or null, spaced any way."""
    if not body.strip():
        return True
    try:
        return json.loads(body) in ({}, None)
    except ValueError:
        return False


def field_limits(request_model: type[BaseModel] | None, path: list) -> dict:
    """The field's own bounds, {"ge": 1, "le": 64}, where the request model gives them."""
    model, field = request_model, None
    for name in path:
        fields = model.model_fields if isinstance(model, type) and issubclass(model, BaseModel) else {}
        if name not in fields:
            return {}
        field = fields[name]
        model = field.annotation
    return {} if field is None else {k: getattr(m, k) for m in field.metadata for k in ("ge", "le") if hasattr(m, k)}


def whole_number_wanted(request_model: type[BaseModel] | None, path: list) -> str:
    """'a whole number from 1 to 64': the field's own range, where the request model gives one."""
    limits = field_limits(request_model, path)
    if "ge" in limits and "le" in limits:
        return f"a whole number from {limits['ge']} to {limits['le']}"
    return f"a whole number, {limits['ge']} or more" if "ge" in limits else "a whole number such as 2"


class ModelLayerRequest(BaseModel):
    """A layer of a model: its weights, which are the same on every text."""

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str = Field(description="a registry name from GET /api/models (any case: every name is lower case)", max_length=64)
    # no bound here: a layer or head out of range, negative too, is answered with the model's own range
    layer: int = Field(description="numbered from 0; the model says how many it has")
    encoding: Literal["base64", "binary"] = Field(
        default="base64", description=f"binary: the answer is {BINARY_MEDIA_TYPE}, a JSON head and the raw arrays"
    )

    @field_validator("model", mode="after")
    @classmethod
    def any_case(cls, name: str) -> str:
        return name.lower()  # "MiniLM", as the terminal, Python and the page's links take it


class ModelTextRequest(ModelLayerRequest):
    """A layer on a text, and one of its heads."""

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    head: int = Field(default=0, description="numbered from 0; the layer says how many it has")


class ModelHeadRequest(ModelTextRequest):
    """One head of a layer on a text: its arrays hold every query, so a request names none."""

    kv_held: int | None = Field(
        default=None,
        ge=0,
        description="the K/V head whose arrays (k, v and theirs, W_K, W_V) the page holds for this layer and text: "
        "left out of the answer where the head reads that one (every head of an MQA layer)",
    )


class ModelTraceRequest(ModelTextRequest):
    """A layer on a text, and the view to open on it: the head and the query."""

    # no bound here either: a query out of range, negative too, is answered with the text's positions
    query: int | None = Field(default=None, description="the query token's position; default: the text's middle word")


class ModelStatus(BaseModel):
    name: str
    title: str
    family: str
    package: str
    installed: bool
    heavy: bool
    state: Literal["idle", "loading", "ready", "error"]
    fraction: float
    message: str
    config: dict | None = None
    outline: dict | None = Field(default=None, description="a named model's layers before it loads: n_layers, and each layer's sliding_window")


def accepts_gzip(request: Request) -> bool:
    for coding in request.headers.get("accept-encoding", "").split(","):
        name, _, params = coding.strip().partition(";")
        if name.strip().lower() == "gzip":
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def json_bytes(answer: BaseModel) -> bytes:
    """The same bytes as answer.model_dump_json().encode(), without the str in between: a trace's
    answer is megabytes, so that str and its re-encoding cost milliseconds."""
    return type(answer).__pydantic_serializer__.to_json(answer)


def gzip_fast(data: bytes) -> bytes:
    """gzip with Huffman coding only (no search for repeats). A real model's layer is mostly float32
    numbers, which have few repeats: this is 4 times faster than gzip's fastest level and, on
    their base64, compresses a little better. A large answer is compressed in one piece a core:
    each piece is deflate blocks ending on a byte boundary (a full flush; the last piece's last
    block marked final), so that the pieces joined are one deflate stream, under one gzip header
    and one trailer (the CRC-32 and length of the whole)."""
    ends = [round(len(data) * i / parallel.WORKERS) for i in range(parallel.WORKERS + 1)] if len(data) >= PARALLEL_GZIP else [0, len(data)]
    view = memoryview(data)
    pieces: list[bytes] = [b""] * (len(ends) - 1)

    def deflate(i: int) -> None:
        raw = zlib.compressobj(1, zlib.DEFLATED, -15, 9, zlib.Z_HUFFMAN_ONLY)  # wbits -15: deflate alone, no header
        last = i == len(pieces) - 1
        pieces[i] = raw.compress(view[ends[i] : ends[i + 1]]) + raw.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH)

    with parallel.cores(len(pieces) > 1) as each:
        each(deflate, range(len(pieces)))
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no flags, no time, unknown system
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return b"".join([header, *pieces, trailer])


# From this many bytes on, gzip_fast() compresses on every core (a 512-token layer is 5 to 12 MB).
PARALLEL_GZIP = 1 << 20


class PageFilesGzip:
    """The page's own files (about 470 KB of scripts and styles) gzipped for a browser that takes
    it: a class loading the page over a network fetches a third of it. The API's answers are
    left as they are (a real model's layer is compressed where it is made; a lab trace and a
    head's arrays reach the page sooner without)."""

    def __init__(self, app):
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1000, compresslevel=6)

    async def __call__(self, scope, receive, send):
        page = scope["type"] == "http" and page_file(scope["path"])
        return await (self.gzip if page else self.app)(scope, receive, send)


def create_app(max_body: int = MAX_BODY, workers: int = 2, queue: int = 16, models: ModelService | None = None, hosts: frozenset[str] | None = None) -> FastAPI:
    """The explorer's app. hosts: the host names it answers for (None: any): a server bound to the
    loopback address answers for LOOPBACK_NAMES, and the names `serve --allow-host` adds."""
    # no /docs or /redoc: their pages load scripts from a CDN, which the page's own CSP (and no
    # internet) would block; the schema itself is at /openapi.json
    # every route refuses a foreign Host or Origin (Guard)
    foreign = {403: {"model": ErrorResponse, "description": "a Host this server does not answer for, or a POST from another site's page"}}
    app = FastAPI(title="mha-explorer", version=__version__, docs_url=None, redoc_url=None, dependencies=[Depends(known_parameters)], responses=foreign)
    example = teaching_payload()  # computed once: the example never changes
    gate = app.state.gate = TraceGate(workers, queue)  # pending: traces running or waiting
    service = models or ModelService()
    app.add_middleware(PageFilesGzip)
    app.add_middleware(Guard, max_body=max_body, hosts=hosts)  # added last: the outermost

    def status(info) -> ModelStatus:
        state, loaded = service.snapshot(info.name)
        return ModelStatus(
            **{k: getattr(info, k) for k in ("name", "title", "family", "package", "installed", "heavy", "outline")},
            **state,
            config=None if loaded is None else loaded.shared_summary(info.name),
        )

    def registry_entry(name: str, in_path: bool = False, installed: bool = True):
        """The registry's entry for name. Refused: a name it lacks (in a body, 422; as the path's
        resource, 404 Not Found), and, when `installed`, a model not installed (409 in a path)."""
        infos = {i.name: i for i in service.infos()}
        if name not in infos:
            message = f"no model named {shown_json(name)}; choose one of: {', '.join(infos)}"
            raise Refused(404, "model", message) if in_path else LabError("model", message)
        if installed and not infos[name].installed:
            message = f"{name} is not installed; run: {infos[name].install}"
            raise Refused(409, "model", message) if in_path else LabError("model", message)
        return infos[name]

    @app.get("/api/models", response_model=list[ModelStatus], responses=ADDRESS_ERRORS)
    def list_models() -> list[ModelStatus]:
        return [status(info) for info in service.infos()]

    @app.get("/api/models/{name}", response_model=ModelStatus, responses=ADDRESS_ERRORS | NO_SUCH_MODEL)
    def model_status(name: str) -> ModelStatus:
        return status(registry_entry(name.lower(), in_path=True, installed=False))  # one not installed says so, as in the list

    load_errors = {413: ERRORS[413], 415: ERRORS[415], 422: {"model": ErrorResponse, "description": "a body was sent (the route takes none), or a parameter of the address that it does not take"}}

    @app.post("/api/models/{name}/load", response_model=ModelStatus, status_code=202, responses=load_errors | NO_SUCH_MODEL | NOT_INSTALLED)
    async def load(name: str) -> ModelStatus:  # a body saying something is refused before it comes here (the middleware)
        name = name.lower()  # any case, as a request's model
        info = await run_in_threadpool(registry_entry, name, in_path=True)
        service.start(name)
        return status(info)

    async def on_model(request: ModelLayerRequest, compute, gzip: bool = False, gated: bool = True) -> Response:
        """compute(model, packer) -> the answer, its arrays in the packer when binary; serialized
        (and gzipped, if asked) on the trace gate, unless it runs no trace (not gated). Errors name
        the field to change. Only a real model's whole layer is worth compressing, to stay under
        10 MB sent; a lab trace and another head's arrays reach the page sooner as they are."""
        state, model = service.snapshot(request.model)
        if model is None:  # only then is the registry read (from disk): a loaded model is installed
            registry_entry(request.model)
            name = request.model
            if state["state"] == "loading":
                why = f"{name} is still loading ({round(100 * state['fraction'])}%, {state['message']}): try again when GET /api/models/{name} says ready"
            elif state["state"] == "error":  # (POST load tries again: a local checkpoint mended is read anew)
                why = f"{name} could not be loaded: {state['message']}" + (f" (POST /api/models/{name}/load)" if name in service.local else "")
            elif state["message"] == SAVED_AGAIN:
                why = f"{name} was saved again since it was read: POST /api/models/{name}/load to read it anew, then ask again"
            elif state["message"] == GONE:
                why = f"{name} is {GONE}, then POST /api/models/{name}/load"
            else:
                why = f"{name} is not loaded yet: POST /api/models/{name}/load first"
            return problem(409, "model", why)
        binary = request.encoding == "binary"

        def serialize() -> bytes:
            packer = Packer(planes=gzip) if binary else None  # bytes by place compress better
            body = json_bytes(compute(model, packer))
            body = packer.body(body) if binary else body
            return gzip_fast(body) if gzip else body

        try:
            if gated and gate.busy():  # a request it would refuse is told what to change now, not after the wait (nor told to retry)
                await run_in_threadpool(check_request, model, request.text, request.layer, request.head, getattr(request, "query", None), getattr(request, "kv_held", None))
            answer = await (gate.run(serialize) if gated else run_in_threadpool(serialize))
        except CheckpointError as error:  # its file cut short in place since it was loaded: no fault of the request's
            return problem(409, "model", f"{request.model}'s weights could not be read: {service.without_paths(request.model, str(error))}")
        except ModelError as error:
            field = next((f for f in ("head", "layer", "query", "kv_held") if str(error).startswith(f)), "text")
            raise LabError(field, str(error)) from None
        headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"} if gzip else None
        return Response(answer, media_type=BINARY_MEDIA_TYPE if binary else "application/json", headers=headers)

    not_loaded = {409: ERRORS[422] | {"description": "the model is not loaded yet"}}

    binary_answer = {200: {"content": {BINARY_MEDIA_TYPE: {}}, "description": "with encoding binary: a JSON head, then the arrays"}}

    @app.post("/api/model-trace", response_model=TracePayload, responses=ERRORS | not_loaded | binary_answer)
    async def model_trace(request: ModelTraceRequest, http: Request) -> Response:
        r = request
        return await on_model(r, lambda model, packer: model_payload(model, r.text, r.layer, r.head, r.query, packer), accepts_gzip(http))

    @app.post("/api/model-head", response_model=HeadArrays, responses=ERRORS | not_loaded | binary_answer)
    async def model_head(request: ModelHeadRequest) -> Response:
        """Another head of a layer the page already holds: that head's arrays only."""
        r = request
        return await on_model(r, lambda model, packer: head_arrays(model, r.text, r.layer, r.head, packer, r.kv_held))

    @app.post("/api/model-weights", response_model=LayerWeights, responses=ERRORS | not_loaded | binary_answer)
    async def model_weights(request: ModelLayerRequest) -> Response:
        """Every head's weights of a layer that weighs little (see the layer's model.whole_weights),
        from which the page works out the other heads itself."""
        r = request
        return await on_model(r, lambda model, packer: layer_weights(model, r.layer, packer), gated=False)  # no trace: read and sent

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(str(WEB.joinpath("index.html")), media_type="text/html")

    @app.get("/api/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/example", response_model=TracePayload, responses=ADDRESS_ERRORS)
    def teaching_example(encoding: Literal["json", "base64"] = "json") -> Response:
        return Response(example_json[encoding], media_type="application/json")

    @app.post("/api/trace", response_model=TracePayload, responses=ERRORS | binary_answer)
    async def lab_trace(request: TraceRequest) -> Response:
        if gate.busy():  # as on_model: bad settings are said now, not after the wait
            await run_in_threadpool(lab_inputs, request)
        if request.encoding != "binary":
            return Response(await gate.run(lambda: json_bytes(lab_payload(request))), media_type="application/json")
        packer = Packer()
        answer = await gate.run(lambda: packer.body(json_bytes(lab_payload(request, packer))))
        return Response(answer, media_type=BINARY_MEDIA_TYPE)

    @app.exception_handler(LabError)
    async def lab_error(request: Request, error: LabError) -> JSONResponse:
        return problem(422, error.field, error.message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        # the same shape as every other error answer, saying what to send instead
        headers = getattr(error, "headers", None)
        if error.status_code == 400:
            if isinstance(error.__cause__, ValueError) and "integer string conversion" in str(error.__cause__):
                # Python reads no whole number of more than 4,300 digits (sys.get_int_max_str_digits)
                return problem(400, "body", "the body holds a number thousands of digits long, which cannot be read; send numbers of the sizes each field takes", headers)
            return problem(400, "body", "the body could not be read as JSON; send a JSON object in plain UTF-8 (not compressed), its arrays nested at most a few hundred deep", headers)
        if error.status_code == 405:
            allowed = next((v for k, v in (headers or {}).items() if k.lower() == "allow"), "")
            asked = request.scope.get("asked_method", request.method)
            return problem(405, "method", f"{asked} is not answered at {request.url.path}; use {allowed or 'another method'}", headers)
        if error.status_code == 404:
            return problem(404, "path", f"there is nothing at {field_name(request.url.path, 80)}; the page is at /, and /openapi.json lists the API's paths", headers)
        return problem(error.status_code, "path", str(error.detail), headers)

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused) -> JSONResponse:
        return problem(error.status, error.field, error.message)

    @app.exception_handler(Busy)
    async def busy(request: Request, error: Busy) -> JSONResponse:
        return problem(503, "server", "too many traces are under way; try again in a second", {"Retry-After": "1"})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        route = request.scope.get("route")
        body = getattr(route, "body_field", None)
        request_model = None if body is None else body.field_info.annotation
        return JSONResponse({"detail": [explain(e, request_model) for e in error.errors()]}, status_code=422)

    example_json = {
        "json": example.model_dump_json(),
        "base64": teaching_payload("base64").model_dump_json(),
    }
    app.mount("/static", StaticFiles(directory=str(WEB)), name="static")
    return app

"""A small blocking HTTP client for web-API plugins (``webapi-task-plugin``).

.. code-block:: python

    from weft_plugin import http

    resp = http.request("POST", f"{url}/jobs", json={"id": key},
                        headers={"Idempotency-Key": key})
    if resp.status >= 400:
        ...
    job = resp.json()

Inside the component it speaks ``wasi:http/outgoing-handler``: the host
checks every request against the manifest's ``egress.allow`` (narrowed by
the operator) before it connects, adds credential headers itself (a plugin
never reads a Secret), and caps the response's size and time.

Errors are :class:`weft_plugin.PluginError` s, so a plugin that lets them
through returns the WIT ``plugin-error``:

- a transport failure (connection refused, DNS, a timeout, a reset) is
  *retryable*: a new attempt may reach the service;
- a request the host refuses (``HTTP-request-denied``: not in the
  allow-list), an invalid URL or header, or a response over the host's
  size cap is *permanent*. The host fails the call naming the URL anyway,
  even when the plugin catches the error.

An HTTP error status (404, 500) is not an exception: the plugin decides
what it means (``resp.ok``, ``resp.raise_for_status()``).

Natively (unit tests) requests go to the function given to
:func:`set_responder`, or, without one, to the network through
``urllib.request`` (no allow-list there). During the build-time warm-up no
request leaves the build: each is answered ``200`` with the body ``{}``.
"""

from __future__ import annotations

import json as _json
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from . import PluginError, _host
from ._host import in_component

__all__ = [
    "HttpError",
    "Request",
    "Response",
    "delete",
    "get",
    "post",
    "put",
    "request",
    "set_responder",
]

# A write to a wasi:io output stream may carry at most 4096 bytes.
_WRITE_CHUNK = 4096
_READ_CHUNK = 64 * 1024


class HttpError(PluginError):
    """A request that did not get a response (or whose response was
    refused): a :class:`PluginError`, retryable for transport failures.
    ``code`` names the ``wasi:http`` error code (``HttpRequestDenied``,
    ``ConnectionRefused``, ...), ``url`` the request's URL."""

    def __init__(self, message: str, retryable: bool, code: str = "", url: str = ""):
        super().__init__(message, retryable)
        self.code = code
        self.url = url


class Response:
    """An HTTP response, read whole. ``headers`` has lower-case names (a
    repeated header's values joined with ``", "``)."""

    def __init__(self, status: int, headers: Optional[Mapping[str, str]] = None,
                 body: Union[bytes, str] = b"", url: str = ""):
        self.status = int(status)
        self.headers: Dict[str, str] = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        self.url = url

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def text(self) -> str:
        """The body as UTF-8 text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; a retryable :class:`PluginError` when it
        is not JSON (a proxy's error page, a truncated answer)."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise PluginError.retryable(
                f"{self.url or 'the response'} answered {self.status} with a body that is not JSON: {e}: "
                f"{self.text()[:200]!r}")

    def raise_for_status(self) -> "Response":
        """Itself when 2xx; else a :class:`PluginError` naming the URL and the
        status: retryable for 5xx, 408 and 429, permanent for other 4xx."""
        if self.ok:
            return self
        retryable = self.status >= 500 or self.status in (408, 429)
        raise PluginError(f"{self.url} answered {self.status}: {self.text()[:500]}", retryable)

    def __repr__(self) -> str:
        return f"Response({self.status}, {len(self.body)} bytes)"


class Request:
    """What a native responder (:func:`set_responder`) is given."""

    def __init__(self, method: str, url: str, headers: List[Tuple[str, str]], body: bytes):
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)

    def __repr__(self) -> str:
        return f"Request({self.method} {self.url}, {len(self.body)} bytes)"


_responder: Optional[Callable[[Request], Response]] = None


def set_responder(fn: Optional[Callable[[Request], Response]]) -> None:
    """Natively, answer every request with ``fn(request)`` (a
    :class:`Response`; raise :class:`HttpError` to fail it) instead of the
    network; ``None`` goes back to the network. Unit tests use it to play
    the service. Inside the component it has no effect."""
    global _responder
    _responder = fn


def request(method: str, url: str, headers: Optional[Mapping[str, str]] = None,
            body: Union[bytes, str, None] = None, json: Any = None) -> Response:
    """Sends one request and reads the whole response.

    ``body`` is bytes or text (UTF-8); ``json`` (instead of ``body``) is
    serialized and sent with ``content-type: application/json``. A
    ``content-length`` is set for any body. Raises :class:`HttpError` (a
    :class:`PluginError`) when no response comes; see the module's doc."""
    method = str(method).upper()
    pairs: List[Tuple[str, str]] = [(str(k), str(v)) for k, v in (headers or {}).items()]
    names = {k.lower() for k, _ in pairs}
    if json is not None:
        if body is not None:
            raise TypeError("request: give body or json, not both")
        body = _json.dumps(json, separators=(",", ":"), ensure_ascii=False)
        if "content-type" not in names:
            pairs.append(("content-type", "application/json"))
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body or b"")
    if (data or method in ("POST", "PUT", "PATCH")) and "content-length" not in names:
        pairs.append(("content-length", str(len(data))))
    if _host.warming:
        # Build time: no network, and the host's imports do not exist yet.
        return Response(200, {"content-type": "application/json"}, b"{}", url)
    if in_component():
        return _send(method, url, pairs, data)
    return _native(Request(method, url, pairs, data))


def get(url: str, headers: Optional[Mapping[str, str]] = None) -> Response:
    """``request("GET", url, headers)``."""
    return request("GET", url, headers)


def post(url: str, json: Any = None, headers: Optional[Mapping[str, str]] = None,
         body: Union[bytes, str, None] = None) -> Response:
    """``request("POST", url, headers, body, json)``."""
    return request("POST", url, headers, body, json)


def put(url: str, json: Any = None, headers: Optional[Mapping[str, str]] = None,
        body: Union[bytes, str, None] = None) -> Response:
    """``request("PUT", url, headers, body, json)``."""
    return request("PUT", url, headers, body, json)


def delete(url: str, headers: Optional[Mapping[str, str]] = None) -> Response:
    """``request("DELETE", url, headers)``."""
    return request("DELETE", url, headers)


# --------------------------------------------------------------------------
# Inside the component: wasi:http
# --------------------------------------------------------------------------

# Error codes a new attempt may not meet again: the request itself is wrong,
# or the host refused it (its allow-list, its response cap).
_PERMANENT = {
    "HttpRequestDenied", "HttpRequestUriInvalid", "HttpRequestUriTooLong",
    "HttpRequestMethodInvalid", "HttpRequestHeaderSectionSize", "HttpRequestHeaderSize",
    "HttpRequestBodySize", "HttpResponseBodySize", "ConfigurationError",
    "DestinationIpProhibited",
}


def _code_name(code: Any) -> str:
    name = type(code).__name__
    return name[len("ErrorCode_"):] if name.startswith("ErrorCode_") else name


def _fail(method: str, url: str, code: Any) -> HttpError:
    name = _code_name(code)
    detail = getattr(code, "value", None)
    if name == "HttpRequestDenied":
        message = f"{method} {url}: denied by the host (not in the plugin's egress allow-list)"
    else:
        message = f"{method} {url}: {name}" + (f" ({detail})" if detail not in (None, "") else "")
    return HttpError(message, name not in _PERMANENT, name, url)


def _method(method: str) -> Any:
    h = _host.wit_http
    known = {"GET": h.Method_Get, "HEAD": h.Method_Head, "POST": h.Method_Post,
             "PUT": h.Method_Put, "DELETE": h.Method_Delete, "CONNECT": h.Method_Connect,
             "OPTIONS": h.Method_Options, "TRACE": h.Method_Trace, "PATCH": h.Method_Patch}
    cls = known.get(method)
    return cls() if cls else h.Method_Other(method)


def _split(method: str, url: str) -> Tuple[str, str, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise HttpError(f"{method} {url}: not an http:// or https:// URL", False,
                        "HttpRequestUriInvalid", url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, parts.netloc, path


def _send(method: str, url: str, pairs: List[Tuple[str, str]], data: bytes) -> Response:
    h, r = _host.wit_http, _host.wit_result
    scheme, authority, path = _split(method, url)
    try:
        fields = h.Fields.from_list([(k, v.encode("utf-8")) for k, v in pairs])
    except r.Err as e:
        raise HttpError(f"{method} {url}: a header the host does not allow ({type(e.value).__name__})",
                        False, "HeaderError", url)
    req = h.OutgoingRequest(fields)
    req.set_method(_method(method))
    req.set_scheme(h.Scheme_Http() if scheme == "http" else h.Scheme_Https())
    req.set_authority(authority)
    req.set_path_with_query(path)
    out = req.body()
    try:
        future = _host.wit_http_out.handle(req, None)
    except r.Err as e:
        raise _fail(method, url, e.value)
    with future:
        try:
            with out.write() as stream:
                for i in range(0, len(data), _WRITE_CHUNK):
                    stream.blocking_write_and_flush(data[i:i + _WRITE_CHUNK])
            h.OutgoingBody.finish(out, None)
        except r.Err:
            pass  # the host stopped reading: the response (or its error) says why
        with future.subscribe() as ready:
            ready.block()
        got = future.get()
    # got: Ok(Ok(response)) | Ok(Err(error-code)); Err(None) only on a second get.
    inner = got.value if isinstance(got, r.Ok) else None
    if not isinstance(inner, r.Ok):
        raise _fail(method, url, inner.value if isinstance(inner, r.Err) else None)
    with inner.value as resp:
        status = resp.status()
        with resp.headers() as fields:
            headers: Dict[str, str] = {}
            for k, v in fields.entries():
                k = k.lower()
                text = v.decode("utf-8", errors="replace")
                headers[k] = f"{headers[k]}, {text}" if k in headers else text
        chunks = []
        with resp.consume() as body, body.stream() as stream:
            while True:
                try:
                    chunks.append(stream.blocking_read(_READ_CHUNK))
                except r.Err as e:
                    if type(e.value).__name__ == "StreamError_Closed":
                        break
                    # The body broke off (a reset, the host's size cap).
                    code = h.http_error_code(e.value.value)
                    raise _fail(method, url, code) from None
    return Response(status, headers, b"".join(chunks), url)


# --------------------------------------------------------------------------
# Natively: a responder, or the network
# --------------------------------------------------------------------------


def _native(req: Request) -> Response:
    if _responder is not None:
        resp = _responder(req)
        if not isinstance(resp, Response):
            raise TypeError(f"the responder must return an http.Response, not {type(resp).__name__}")
        resp.url = resp.url or req.url
        return resp
    import urllib.error  # natively only: the component has no filesystem to import from
    import urllib.request

    _split(req.method, req.url)
    native = urllib.request.Request(req.url, data=req.body if req.body or req.method in ("POST", "PUT", "PATCH") else None,
                                    method=req.method, headers=dict(req.headers))
    try:
        with urllib.request.urlopen(native, timeout=30) as resp:
            return Response(resp.status, dict(resp.headers.items()), resp.read(), req.url)
    except urllib.error.HTTPError as e:
        return Response(e.code, dict(e.headers.items()), e.read(), req.url)
    except (urllib.error.URLError, OSError) as e:
        raise HttpError(f"{req.method} {req.url}: {e}", True, "ConnectionError", req.url)

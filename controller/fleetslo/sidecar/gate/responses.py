"""The gate's own answers: OpenAI-style JSON errors, so clients' error handling just works.

Every error the gate itself produces (as opposed to one relayed from vLLM) has the body
``{"error": {"message": ..., "type": ..., "code": ...}}`` that OpenAI clients parse. Building
responses only; no decisions.
"""

from __future__ import annotations

import json

from aiohttp import web

from fleetslo.sidecar.gate.admission import DRAINING, QUEUE_FULL, QUEUE_TIMEOUT

#: Seconds a client is told to wait before retrying a request the gate turned away.
RETRY_AFTER_SECONDS = 1

#: Rejection reasons of the gate itself beyond admission's, for ``fleetslo_gate_rejected_total``.
BODY_TOO_LARGE = "body_too_large"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
#: The bodies the gate holds at once are at their bound (``guard.BodyBudget``): 503.
BUSY = "busy"
#: The client did not send its whole body in time: 408.
BODY_TIMEOUT = "body_timeout"
#: A request the gate cannot relay (a request line in absolute form): 400.
BAD_REQUEST = "bad_request"

_MESSAGES = {
    QUEUE_FULL: "The server is at capacity and its queue is full; retry later.",
    QUEUE_TIMEOUT: "The request waited too long for capacity; retry later.",
    DRAINING: "This replica is draining and accepts no new requests; retry on another replica.",
    BUSY: "The server holds as many request bodies as it can; retry later.",
}


def json_error(
    status: int, message: str, type_: str, code: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": type_, "code": code}}
    text = json.dumps(body)
    return web.Response(status=status, text=text, content_type="application/json", headers=headers)


def overloaded(reason: str) -> web.Response:
    """503 with ``Retry-After`` for a request admission turned away (``reason`` from admission)."""
    return json_error(
        503, _MESSAGES.get(reason, reason), "server_overloaded", reason,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )  # fmt: skip


def body_too_large(limit: int) -> web.Response:
    return json_error(
        413, f"The request body is larger than this server accepts ({limit} bytes).",
        "invalid_request_error", BODY_TOO_LARGE,
    )  # fmt: skip


def upstream_unavailable(detail: str) -> web.Response:
    return json_error(
        502, f"The inference server could not be reached ({detail}).", "upstream_error", UPSTREAM_UNAVAILABLE
    )


def body_timeout(seconds: float) -> web.Response:
    return json_error(
        408, f"The request body did not arrive within {seconds:g} s.", "invalid_request_error", BODY_TIMEOUT,
        headers={"Connection": "close"},
    )  # fmt: skip


def absolute_form() -> web.Response:
    return json_error(
        400, "This server is not a forward proxy: send the path only (origin-form request line).",
        "invalid_request_error", BAD_REQUEST,
    )  # fmt: skip

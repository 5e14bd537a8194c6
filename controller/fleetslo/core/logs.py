"""Structured logging: one JSON object per line on stderr, the format log pipelines ingest.

Extra fields passed with ``logger.info(msg, extra={"fields": {...}})`` are merged into the object,
which is how decisions are audited (``reason``, ``target``, …) without string parsing.

Quiet by default: the libraries that log one line per request or per job run (httpx's "HTTP
Request", APScheduler's "Running job" / "executed successfully") only say warnings unless the
level is ``debug``, where everything is shown.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


#: Loggers that speak once per request or per scheduler tick: warnings only, unless debugging.
#: (``fleetslo.sim.audit``: the audit line of every simulated decision, thousands per replay.)
CHATTY_LOGGERS = (
    "httpx", "httpcore", "apscheduler", "aiohttp.access", "kubernetes.client.rest", "fleetslo.sim.audit",
)  # fmt: skip

#: The levels ``--log-level`` accepts.
LEVELS = ("debug", "info", "warning", "error")


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    chosen = getattr(logging, level.upper(), logging.INFO)
    root.setLevel(chosen)
    quiet = logging.NOTSET if chosen <= logging.DEBUG else max(chosen, logging.WARNING)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)

"""The admin API's bearer token: long enough, private, and re-read when its file changes.

A token is a password for the replica's batch limit and drain. ``TokenSource`` refuses a token
shorter than ``MIN_TOKEN_LENGTH`` characters (issue 15 defect 16: three characters were
accepted), warns when the file can be read by its group or by everyone, and re-reads the file
whenever it changes (a rotated Kubernetes Secret is swapped in place, and the gate picks the new
token up at the next admin request, with no restart). While the file holds no usable token every
admin request is refused: off is the safe side. The token itself is never logged.

Reads one small file when its ``stat`` changes; nothing else.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from fleetslo.sidecar.settings import MIN_TOKEN_LENGTH, token_problem

__all__ = ["MIN_TOKEN_LENGTH", "TokenSource", "token_problem"]

log = logging.getLogger("fleetslo.gate.admin")


class TokenSource:
    """The token now: fixed (``static``) or the content of ``path``, re-read on change."""

    def __init__(self, *, path: str | Path | None = None, static: str | None = None) -> None:
        if (path is None) == (static is None):
            raise ValueError("a token source needs exactly one of path and static")
        self.path = None if path is None else Path(path)
        self._token: bytes | None = None
        self._seen: tuple[int, int, int] | None = None
        if static is not None:
            problem = token_problem(static)
            if problem:
                raise ValueError(f"the admin token is {problem}")
            self._token = static.encode()
        else:
            self.current()  # warn at start, not at the first request

    def current(self) -> bytes | None:
        """The usable token, or ``None`` while there is none (every admin request is refused)."""
        if self.path is None:
            return self._token
        try:
            st = self.path.stat()
        except OSError as exc:
            if self._seen != (0, 0, 0):
                log.warning("admin token file %s cannot be read (%s): admin API refuses every request",
                            self.path, exc.strerror or type(exc).__name__)  # fmt: skip
            self._seen, self._token = (0, 0, 0), None
            return None
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        if seen != self._seen:
            self._seen = seen
            self._token = self._read(st)
        return self._token

    def _read(self, st: os.stat_result) -> bytes | None:
        assert self.path is not None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("admin token file %s is readable by its group or others (mode %o): "
                        "make it 0600 or 0400 (a Secret's defaultMode)", self.path,
                        stat.S_IMODE(st.st_mode))  # fmt: skip
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("admin token file %s cannot be read (%s): admin API refuses every request",
                        self.path, getattr(exc, "strerror", None) or type(exc).__name__)  # fmt: skip
            return None
        problem = token_problem(token) if token else "empty"
        if problem:
            log.warning("admin token in %s is %s: admin API refuses every request", self.path, problem)
            return None
        log.info("admin token read from %s", self.path)
        return token.encode()

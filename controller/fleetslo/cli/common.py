"""What every ``fleetslo`` subcommand shares: the ``Command`` record, exit codes, reading files.

Part of the command line, the only layer that reads argv, the environment and files.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleetslo.core.errors import ConfigError

#: The exit statuses of every subcommand (the README's "Exit codes"): 0 done (or stopped by SIGTERM,
#: as a service is asked to), 1 a runtime failure (the machine, the cluster, a file that cannot be
#: written), 2 bad usage (a flag, a config key, a spec), 130 interrupted (SIGINT, Ctrl-C: 128 + 2).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

log = logging.getLogger("fleetslo")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# --------------------------------------------------------------------------------------------
# helpers shared by commands
# --------------------------------------------------------------------------------------------


def read_yaml_file(path: str) -> Any:
    """One YAML document from ``path``; a ``ConfigError`` that names the file otherwise."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc


def read_yaml_documents(path: str) -> list[Any]:
    """Every YAML document in ``path`` (for multi-document spec files)."""
    try:
        return list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc


def merged_options(args: argparse.Namespace, keys: Sequence[str]) -> dict[str, Any]:
    """Settings from ``--config`` (if any) overlaid with the flags the user gave explicitly."""
    options: dict[str, Any] = {}
    config = getattr(args, "config", None)
    if config:
        loaded = read_yaml_file(config)
        if loaded is not None and not isinstance(loaded, Mapping):
            raise ConfigError(f"{config}: expected a mapping of settings at the top level")
        options.update({str(k).replace("-", "_"): v for k, v in (loaded or {}).items()})
    for key in keys:
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
    return options


def read_token_file(path: str) -> str | None:
    """The bearer token in ``path`` (surrounding whitespace dropped); ``None`` if unreadable or empty.

    A missing or empty file turns the admin API off rather than failing the sidecar: serving
    traffic matters more than being steerable, and off is the safe side. The token is never logged.
    """
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("admin token file %s cannot be read (%s): the gate admin API stays off", path,
                    getattr(exc, "strerror", None) or type(exc).__name__)  # fmt: skip
        return None
    if not token:
        log.warning("admin token file %s is empty: the gate admin API stays off", path)
        return None
    return token


def prepare_output(path: str, flag: str) -> Path:
    """``path`` ready to be written once the work is done: its folders created now, and a
    ``ConfigError`` naming ``flag`` now (not after minutes of work) if it cannot be written."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{flag}: {path} is a folder (give a file name, e.g. {target / 'report.html'})")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot create the folder {target.parent} ({exc.strerror})") from None
    writable = os.access(target, os.W_OK) if target.exists() else os.access(target.parent, os.W_OK)
    if not writable:
        raise ConfigError(f"{flag}: {path} cannot be written (permission denied)")
    return target

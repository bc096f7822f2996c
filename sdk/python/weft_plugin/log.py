"""Log lines that land in the host's log under the plugin's name.

    from weft_plugin import log
    log.info("building the RayJob")
    log.log("debug", "config parsed")

Natively (unit tests) they go to stderr. Inside the component prefer them
to ``print``: the host forwards stdout/stderr lines too, but without a level.
"""

import sys

from . import _host
from ._host import in_component

LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Writes one line at ``level``: trace, debug, info, warn or error."""
    level = str(level).lower()
    if level not in LEVELS:
        level = "info"
    if in_component():
        wit_level = getattr(_host.wit_types.Level, level.upper())
        if not _host.warming:
            _host.wit_log.log(wit_level, str(message))
    elif not _host.warming:
        print(f"[{level}] {message}", file=sys.stderr)


def trace(message: str) -> None:
    """Logs at trace level."""
    log("trace", message)


def debug(message: str) -> None:
    """Logs at debug level."""
    log("debug", message)


def info(message: str) -> None:
    """Logs at info level."""
    log("info", message)


def warn(message: str) -> None:
    """Logs at warn level."""
    log("warn", message)


def error(message: str) -> None:
    """Logs at error level."""
    log("error", message)

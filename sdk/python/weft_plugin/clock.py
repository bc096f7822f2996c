"""Clocks from the host (natively: the system's).

Inside the component prefer these to ``time.time()``: they are the host's
clocks, which the host controls in tests.
"""

import time

from . import _host
from ._host import in_component


def now_millis() -> int:
    """Wall-clock time in milliseconds since the Unix epoch."""
    if _host.warming:
        return 0
    if in_component():
        return _host.wit_clock.now_millis()
    return int(time.time() * 1000)


def monotonic_nanos() -> int:
    """A monotonic clock in nanoseconds, for durations inside one call."""
    if _host.warming:
        return 0
    if in_component():
        return _host.wit_clock.monotonic_nanos()
    return time.monotonic_ns()

"""A small key/value store per plugin that outlives a call.

Instances are fresh for every call, so this is the only way for a plugin to
remember something (a rate-limit bucket, a cache). Keys are private to the
plugin; values are bytes, bounded in size by the host. Natively it is an
in-memory dict of this process.

    from weft_plugin import state
    state.set("seen/" + ctx.node_id, b"1", ttl_millis=60_000)
    state.get("seen/" + ctx.node_id)   # b"1", or None when missing/expired
"""

from typing import Dict, Optional, Tuple, Union

from . import _host, clock
from ._host import in_component

_native: Dict[str, Tuple[bytes, Optional[int]]] = {}


def _now() -> int:
    return clock.now_millis()


def get(key: str) -> Optional[bytes]:
    """The value of ``key``; None when missing or expired."""
    if _host.warming:
        return None
    if in_component():
        return _host.wit_state.get(key)
    hit = _native.get(key)
    if hit is None:
        return None
    value, expires = hit
    if expires is not None and _now() >= expires:
        del _native[key]
        return None
    return value


def set(key: str, value: Union[bytes, str], ttl_millis: Optional[int] = None) -> None:
    """Stores ``value`` (bytes; a str is UTF-8 encoded), optionally expiring
    after ``ttl_millis``. Raises ValueError when the host refuses it (a key
    or value larger than it allows)."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    if _host.warming:
        return
    if in_component():
        try:
            _host.wit_state.set(key, bytes(value), ttl_millis)
        except _host.wit_result.Err as e:
            raise ValueError(f"state.set({key!r}): {e.value}") from None
        return
    _native[key] = (bytes(value), None if ttl_millis is None else _now() + ttl_millis)


def delete(key: str) -> None:
    """Removes ``key``; removing a missing key is not an error."""
    if _host.warming:
        return
    if in_component():
        _host.wit_state.delete(key)
        return
    _native.pop(key, None)

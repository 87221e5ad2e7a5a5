"""The commands' arguments: one object, each field checked, bad ones answered as InvalidParams."""
from __future__ import annotations

from pygls.exceptions import JsonRpcInvalidParams


def invalid(message: str) -> JsonRpcInvalidParams:
    """Bad arguments: InvalidParams with a one-line message, not an internal error with a traceback."""
    return JsonRpcInvalidParams(message)


def argument(args: tuple, name: str, expected: type, required: bool = True):
    """Field `name` of the command's one object argument, of type `expected` (None when optional and absent)."""
    if not args or not isinstance(args[0], dict):
        raise invalid(f"expected one object argument with {name!r}")
    value = args[0].get(name)
    if value is None and not required:
        return None
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise invalid(f"argument {name!r} must be a {expected.__name__}, got {value!r:.80}")
    return value

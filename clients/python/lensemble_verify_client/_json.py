"""Strict JSON, as the C verifier parses it (src/lib/vd_json.c).

Python's json module is more lenient than the verifier in a few ways that
matter for a security check: it takes the last of two duplicate keys,
accepts NaN and Infinity, lets lone UTF-16 surrogates through ``\\u``
escapes and nests as deep as the interpreter allows. Here every document
is refused that the C parser refuses, so that both read one artifact the
same way or not at all.
"""

import json

__all__ = ["JSONError", "NegZero", "loads", "is_int", "is_u64", "INT64_MIN", "INT64_MAX"]

MAX_DEPTH = 64
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_U64_LIMIT = 1 << 64
# A literal with more digits than this is beyond every range checked here;
# it stands for "too big" without asking int() for thousands of digits.
_MAX_DIGITS = 40
_HUGE = 1 << 200


class JSONError(ValueError):
    """The bytes are not a JSON document the verifier accepts."""


class NegZero(int):
    """The literal ``-0``: zero as a value, but negative to the verifier,
    which refuses it wherever it wants a non-negative integer."""

    __slots__ = ()

    def __new__(cls):
        return int.__new__(cls, 0)


def _parse_int(s):
    digits = len(s) - (s[0] == "-")
    if digits > _MAX_DIGITS:
        return -_HUGE if s[0] == "-" else _HUGE
    if s == "-0":
        return NegZero()
    return int(s)


def _parse_constant(name):
    raise JSONError("%s is not JSON" % name)


def _pairs(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise JSONError("duplicate object key %r" % k[:64])
            seen.add(k)
    return obj


def _check_str(s):
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise JSONError("lone surrogate in a \\u escape") from None


def _check_tree(root, max_depth):
    """Depth and strings, without recursion."""
    stack = [(root, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            if depth > max_depth:
                raise JSONError("nesting deeper than %d" % max_depth)
            for k, c in v.items():
                _check_str(k)
                if isinstance(c, (dict, list)):
                    stack.append((c, depth + 1))
                elif isinstance(c, str):
                    _check_str(c)
        elif isinstance(v, list):
            if depth > max_depth:
                raise JSONError("nesting deeper than %d" % max_depth)
            for c in v:
                if isinstance(c, (dict, list)):
                    stack.append((c, depth + 1))
                elif isinstance(c, str):
                    _check_str(c)
        elif isinstance(v, str):
            _check_str(v)


def loads(data, max_depth=MAX_DEPTH):
    """Parse ``data`` (bytes-like, UTF-8) strictly, nested at most
    ``max_depth`` deep; raise JSONError."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise JSONError("invalid UTF-8 at byte %d" % e.start) from None
    try:
        obj = json.loads(text, object_pairs_hook=_pairs, parse_int=_parse_int,
                         parse_constant=_parse_constant)
    except JSONError:
        raise
    except RecursionError:
        raise JSONError("nesting deeper than %d" % max_depth) from None
    except ValueError as e:
        raise JSONError(str(e)) from None
    _check_tree(obj, max_depth)
    return obj


def is_int(v):
    """An integer literal that fits int64 (``-0`` included)."""
    return (type(v) is int or type(v) is NegZero) and INT64_MIN <= v <= INT64_MAX


def is_u64(v):
    """A non-negative integer literal that fits uint64 (``-0`` is not)."""
    return type(v) is int and 0 <= v < _U64_LIMIT

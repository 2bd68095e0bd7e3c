"""Bounded JSON for every request body: a nesting cap, and a 400 rather than a 500 past it.

DRF's own JSONParser hands the body to ``json.load``, so a body nested a few thousand levels
deep raises RecursionError (a 500) before any view or serializer runs. This parser is the
project's default (settings ``REST_FRAMEWORK``); page forms that take JSON text use
``json_loads_bounded`` directly. The body's size is capped by Django's
DATA_UPLOAD_MAX_MEMORY_SIZE (a 413 from ``kernelevolve_site.api.exception_handler``).
"""

import json

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils.json import strict_constant

# Deeper than any payload the portal takes (a workload is 4 levels, a runtime report 5).
MAX_JSON_DEPTH = 64


class JSONBoundsError(ValueError):
    """JSON text that is invalid or nested too deeply; the message says which."""


class JSONTooDeep(JSONBoundsError):
    """Valid or not, JSON text nested deeper than the cap."""


def _depth_exceeds(value, max_depth: int) -> bool:
    # Iterative, so the check itself cannot hit the recursion limit.
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def json_loads_bounded(text: str, *, max_depth: int = MAX_JSON_DEPTH, strict: bool = False):
    """``json.loads`` that raises JSONBoundsError, never RecursionError, on hostile input.

    ``strict`` refuses NaN and Infinity, as DRF's STRICT_JSON does.
    """
    try:
        value = json.loads(text, parse_constant=strict_constant if strict else None)
    except RecursionError as exc:
        raise JSONTooDeep(f"nested deeper than {max_depth} levels") from exc
    except ValueError as exc:  # JSONDecodeError, and NaN/Infinity when strict
        raise JSONBoundsError(str(exc)) from exc
    if isinstance(value, dict | list) and _depth_exceeds(value, max_depth):
        raise JSONTooDeep(f"nested deeper than {max_depth} levels")
    return value


class BoundedJSONParser(JSONParser):
    """JSON bodies nested at most MAX_JSON_DEPTH levels deep."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding} text") from exc
        try:
            return json_loads_bounded(text, strict=self.strict)
        except JSONBoundsError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc

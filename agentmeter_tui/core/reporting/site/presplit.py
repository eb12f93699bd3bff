"""A Jinja2 page template rendered once and then filled with ``str.join``: the trial page, written
ten thousand times in a paper grid's site, where the template engine's per-page work (context,
attribute lookups, one markup object per value) was a tenth of a worker's CPU.

The template stays the source of truth. A page's context is reduced to its *shape* (the keys of
its dicts, the lengths of its lists, and each falsy value itself, since conditions test those);
the first page of each shape is rendered by Jinja2 once more with a sentinel in place of every
truthy value, and the output is cut at the sentinels. A sentinel shows whether the template
escaped it (it holds a ``&``), so a value is later escaped exactly where Jinja2 would have. The
first page of each shape is also rendered for real and compared: a template that does more with
a value than print it (a comparison, a filter) gives a different page, and its shape is then
always rendered by Jinja2.
"""

from __future__ import annotations

import re
from itertools import count
from typing import Any

import markupsafe

from .model import escape

_SENTINEL = re.compile(r"@@(\d+)(&amp;|&)@@")
_HASHABLE = (str, int, float, bool, type(None))
_JINJA = object()  # a shape the pre-split output got wrong: rendered by Jinja2


def _shape(value: Any, leaves: list[Any]) -> Any:
    """What the template's branches and loops can see of ``value``; its truthy scalars are
    appended to ``leaves`` in a fixed order (the order of :func:`_dummy`'s sentinels)."""
    kind = type(value)
    if kind is dict:
        return (dict, tuple((k, _shape(v, leaves)) for k, v in value.items()))
    if kind is list or kind is tuple:
        return (kind, tuple(_shape(v, leaves) for v in value))
    if value:
        leaves.append(value)
        return True
    return (kind, value if kind in _HASHABLE else repr(value))


def _dummy(value: Any, numbers: count) -> Any:
    """``value`` with a sentinel for each truthy scalar, in :func:`_shape`'s order."""
    kind = type(value)
    if kind is dict:
        return {k: _dummy(v, numbers) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(_dummy(v, numbers) for v in value)
    return f"@@{next(numbers)}&@@" if value else value


def _escaped(value: Any) -> str:
    """``value`` as Jinja2's autoescape prints it."""
    return escape(value) if type(value) is str else str(markupsafe.escape(value))


class PreSplit:
    """``render(**context)``: the same text as ``template.render(**context)``."""

    def __init__(self, template: Any) -> None:
        self.template = template
        self.shapes: dict[Any, Any] = {}

    def render(self, **context: Any) -> str:
        leaves: list[Any] = []
        shape = _shape(context, leaves)
        cut = self.shapes.get(shape)
        if cut is None:
            return self._first(shape, context)
        if cut is _JINJA:
            return self.template.render(**context)
        literals, slots = cut
        out = [literals[0]]
        for (n, escaped), literal in zip(slots, literals[1:]):
            value = leaves[n]
            out.append(_escaped(value) if escaped else str(value))
            out.append(literal)
        return "".join(out)

    def _first(self, shape: Any, context: Any) -> str:
        text = self.template.render(**context)
        try:
            pieces = _SENTINEL.split(self.template.render(**_dummy(context, count())))
        except Exception:  # noqa: BLE001 - a template that reads into a value (an attribute, a method)
            self.shapes[shape] = _JINJA
            return text
        # split() gives literal, number, entity, literal, number, entity, ..., literal
        literals = pieces[0::3]
        slots = [(int(n), entity == "&amp;") for n, entity in zip(pieces[1::3], pieces[2::3])]
        self.shapes[shape] = (literals, slots)
        if self.render(**context) != text:
            self.shapes[shape] = _JINJA
        return text

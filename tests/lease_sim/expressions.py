"""DynamoDB condition, key-condition and update expressions, over items in typed form.

Enough of the grammar for every expression kinesis-src sends (comparisons,
AND/OR/NOT, parentheses, ``attribute_exists``, ``attribute_not_exists``,
``begins_with``; SET with ``a + b`` / ``a - b`` / ``if_not_exists``, REMOVE,
ADD on numbers). An expression outside it fails loudly (``ExpressionError``)
rather than being half-understood: a simulation that silently ignored part
of a condition would prove nothing. Parsed expressions are cached by text.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import cache
from typing import Any, Callable, Mapping

Item = dict[str, dict[str, Any]]
Names = Mapping[str, str]
Values = Mapping[str, dict[str, Any]]
Condition = Callable[[Item, Names, Values], bool]
Update = Callable[[Item, Names, Values], Item]

_TOKEN = re.compile(r"\s*(#\w+|:\w+|[A-Za-z_]\w*|<>|<=|>=|[=<>(),+\-])")
_KEYWORDS = {"AND", "OR", "NOT", "SET", "REMOVE", "ADD", "DELETE"}


class ExpressionError(ValueError):
    """An expression the simulated DynamoDB does not understand, or one DynamoDB would reject."""


def _tokens(text: str) -> list[str]:
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ExpressionError(f"cannot read {text[pos:]!r} in {text!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise ExpressionError(f"expected {expected or 'more'} at token {self.pos} of {self.text!r}, got {token!r}")
        self.pos += 1
        return token


# -- operands -----------------------------------------------------------------------


def _name(token: str, names: Names) -> str:
    if token.startswith("#"):
        if token not in names:
            raise ExpressionError(f"name {token} is not in ExpressionAttributeNames")
        return names[token]
    return token


def _path(reader: _Reader) -> Callable[[Names], str]:
    token = reader.take()
    if token.startswith(":") or token.upper() in _KEYWORDS or not (token.startswith("#") or token[0].isalpha()):
        raise ExpressionError(f"expected an attribute name, got {token!r} in {reader.text!r}")
    return lambda names: _name(token, names)


def _operand(reader: _Reader) -> Callable[[Item, Names, Values], Any]:
    token = reader.peek()
    if token is not None and token.startswith(":"):
        reader.take()

        def value(item: Item, names: Names, values: Values) -> Any:
            if token not in values:
                raise ExpressionError(f"value {token} is not in ExpressionAttributeValues")
            return values[token]

        return value
    path = _path(reader)
    return lambda item, names, values: item.get(path(names))


def _plain(typed: Any) -> Any:
    """A typed value as something comparable: numbers as Decimal, strings as str."""
    if typed is None:
        return None
    (kind, raw), = typed.items()
    return Decimal(raw) if kind == "N" else (kind, repr(raw)) if kind in ("L", "M") else raw


# -- conditions ---------------------------------------------------------------------

_COMPARE = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _or(reader: _Reader) -> Condition:
    parts = [_and(reader)]
    while (reader.peek() or "").upper() == "OR":
        reader.take()
        parts.append(_and(reader))
    return parts[0] if len(parts) == 1 else lambda i, n, v: any(p(i, n, v) for p in parts)


def _and(reader: _Reader) -> Condition:
    parts = [_unary(reader)]
    while (reader.peek() or "").upper() == "AND":
        reader.take()
        parts.append(_unary(reader))
    return parts[0] if len(parts) == 1 else lambda i, n, v: all(p(i, n, v) for p in parts)


def _unary(reader: _Reader) -> Condition:
    token = reader.peek()
    if token is None:
        raise ExpressionError(f"condition ends early: {reader.text!r}")
    if token.upper() == "NOT":
        reader.take()
        inner = _unary(reader)
        return lambda i, n, v: not inner(i, n, v)
    if token == "(":
        reader.take()
        inner = _or(reader)
        reader.take(")")
        return inner
    if token in ("attribute_exists", "attribute_not_exists", "begins_with"):
        return _function(reader)
    left = _operand(reader)
    op = reader.take()
    if op not in _COMPARE:
        raise ExpressionError(f"unsupported comparator {op!r} in {reader.text!r}")
    right = _operand(reader)
    compare = _COMPARE[op]

    def comparison(item: Item, names: Names, values: Values) -> bool:
        a, b = left(item, names, values), right(item, names, values)
        if a is None or b is None or set(a) != set(b):  # missing or of another type: false, as DynamoDB
            return op == "<>" and not (a is None and b is None)
        return compare(_plain(a), _plain(b))

    return comparison


def _function(reader: _Reader) -> Condition:
    name = reader.take()
    reader.take("(")
    path = _path(reader)
    if name == "begins_with":
        reader.take(",")
        prefix = _operand(reader)
        reader.take(")")

        def begins(item: Item, names: Names, values: Values) -> bool:
            got, want = item.get(path(names)), prefix(item, names, values)
            return got is not None and "S" in got and got["S"].startswith(want["S"])

        return begins
    reader.take(")")
    if name == "attribute_exists":
        return lambda item, names, values: path(names) in item
    return lambda item, names, values: path(names) not in item


@cache
def condition(text: str) -> Condition:
    """Parse a ConditionExpression (or KeyConditionExpression) once."""
    reader = _Reader(text)
    parsed = _or(reader)
    if reader.peek() is not None:
        raise ExpressionError(f"unexpected {reader.peek()!r} in condition {text!r}")
    return parsed


# -- updates ------------------------------------------------------------------------


def _number(value: Any, what: str) -> Decimal:
    if value is None or "N" not in value:
        raise ExpressionError(f"{what}: an operand is missing or not a number (DynamoDB: ValidationException)")
    return Decimal(value["N"])


def _set_value(reader: _Reader) -> Callable[[Item, Names, Values], Any]:
    if reader.peek() == "if_not_exists":
        reader.take()
        reader.take("(")
        path = _path(reader)
        reader.take(",")
        default = _operand(reader)
        reader.take(")")
        return lambda i, n, v: i.get(path(n)) if path(n) in i else default(i, n, v)
    left = _operand(reader)
    if reader.peek() not in ("+", "-"):
        return left
    sign = 1 if reader.take() == "+" else -1
    right = _operand(reader)

    def arithmetic(item: Item, names: Names, values: Values) -> Any:
        total = _number(left(item, names, values), reader.text) + sign * _number(right(item, names, values), reader.text)
        return {"N": str(total)}

    return arithmetic


def _clause(reader: _Reader, action: str) -> list[Callable[[Item, Item, Names, Values], None]]:
    """One SET/REMOVE/ADD clause: steps reading the old item and writing the new one."""
    steps: list[Callable[[Item, Item, Names, Values], None]] = []
    while True:
        path = _path(reader)
        if action == "SET":
            reader.take("=")
            value = _set_value(reader)
            steps.append(lambda old, new, n, v, p=path, val=value: new.__setitem__(p(n), val(old, n, v)))
        elif action == "REMOVE":
            steps.append(lambda old, new, n, v, p=path: new.pop(p(n), None))
        elif action == "ADD":
            value = _operand(reader)

            def add(old: Item, new: Item, n: Names, v: Values, p=path, val=value) -> None:
                current = old.get(p(n))
                amount = _number(val(old, n, v), reader.text)
                new[p(n)] = {"N": str(amount if current is None else _number(current, reader.text) + amount)}

            steps.append(add)
        else:
            raise ExpressionError(f"unsupported update action {action} in {reader.text!r}")
        if reader.peek() != ",":
            return steps
        reader.take(",")


@cache
def update(text: str) -> Update:
    """Parse an UpdateExpression once; the result maps (old item, names, values) to the new item."""
    reader = _Reader(text)
    steps: list[Callable[[Item, Item, Names, Values], None]] = []
    while reader.peek() is not None:
        action = reader.take().upper()
        if action not in ("SET", "REMOVE", "ADD"):
            raise ExpressionError(f"expected SET, REMOVE or ADD in {text!r}, got {action!r}")
        steps.extend(_clause(reader, action))

    def apply(old: Item, names: Names, values: Values) -> Item:
        new = dict(old)  # every operand reads the item as it was before the update, as DynamoDB
        for step in steps:
            step(old, new, names, values)
        return new

    return apply

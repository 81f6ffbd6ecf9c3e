"""No module of kinesis_src names a private botocore or aiobotocore attribute, except aws/botocore_internals.py.

"Private" means a single-underscore name that botocore or aiobotocore
defines (a method, a module function, an attribute it assigns). The test
reads our source's syntax trees and flags: ``x._name`` on anything but our
own objects; ``self._name``, ``super()._name`` and ``def _name`` inside a
class derived from a botocore or aiobotocore class; ``getattr(x, "_name")``
and its siblings; and ``from botocore... import _name``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from functools import lru_cache
from pathlib import Path

import aiobotocore
import botocore

import kinesis_src

PACKAGE = Path(kinesis_src.__file__).resolve().parent
INTERNALS = PACKAGE / "aws" / "botocore_internals.py"
_VENDORS = ("botocore", "aiobotocore")
_NAME_CALLS = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _trees(root: Path) -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in sorted(root.rglob("*.py"))}


def _defined_private_names(trees: dict[Path, ast.Module], *, own_only: bool = False) -> set[str]:
    """Private names a body of code defines: functions, classes, attributes it assigns.

    ``own_only``: only attributes assigned on ``self``/``cls`` count (``x._name = ...`` on another
    object sets someone else's attribute).
    """
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if not own_only or (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    names.add(node.attr)
    return {name for name in names if _private(name)}


def _vendor_privates_of(path: Path, class_name: str) -> frozenset[str]:
    """The private names botocore/aiobotocore classes in our class's MRO define (all of theirs if not importable)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    try:
        cls = getattr(importlib.import_module(module), class_name)
    except (ImportError, AttributeError, ValueError):
        return vendor_private_names()
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] not in _VENDORS:
            continue
        names |= {name for name in vars(klass) if _private(name)}
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        names |= _defined_private_names({Path(): ast.parse(source)})
    return frozenset(names)


@lru_cache(maxsize=1)
def vendor_private_names() -> frozenset[str]:
    found: set[str] = set()
    for package in (botocore, aiobotocore):
        found |= _defined_private_names(_trees(Path(package.__file__).resolve().parent))
    return frozenset(found)


def _vendor_bindings(tree: ast.Module) -> set[str]:
    """Names a module binds to botocore/aiobotocore modules or their members."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in _VENDORS}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _VENDORS:
            bound |= {a.asname or a.name for a in node.names}
    return bound


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _vendor_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """Our classes derived, directly or through our other classes, from a botocore/aiobotocore class."""
    derived: set[str] = set()
    while True:
        before = len(derived)
        for tree in trees.values():
            vendor = _vendor_bindings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                    _root(base) in vendor or _root(base) in derived for base in node.bases
                ):
                    derived.add(node.name)
        if len(derived) == before:
            return derived


def _is_super_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


class _Finder(ast.NodeVisitor):
    def __init__(self, path: Path, ours: set[str], vendor_classes: set[str], vendor: set[str]) -> None:
        self.path, self.ours, self.vendor_classes, self.vendor = path, ours, vendor_classes, vendor
        self.private = vendor_private_names()
        self.classes: list[frozenset[str]] = []  # per enclosing class: the vendor privates it inherits
        self.found: list[tuple[int, str]] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        inherited = _vendor_privates_of(self.path, node.name) if node.name in self.vendor_classes else frozenset()
        self.classes.append(inherited)
        self.generic_visit(node)
        self.classes.pop()

    def _inherited(self) -> frozenset[str]:
        return self.classes[-1] if self.classes else frozenset()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in self._inherited():
            self._flag(node, f"overrides {node.name}")
        self.generic_visit(node)

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        if on_self or _is_super_call(node.value):
            if name in self._inherited():
                self._flag(node, f"{ast.unparse(node)}")
        elif name in self.private and (name not in self.ours or _root(node) in self.vendor):
            self._flag(node, f"{ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in _NAME_CALLS and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in self.private and name.value not in self.ours:
                self._flag(node, f"{node.func.id}(..., {name.value!r})")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (node.module or "").split(".")[0] in _VENDORS:
            for alias in node.names:
                if _private(alias.name):
                    self._flag(node, f"from {node.module} import {alias.name}")


def private_vendor_names(trees: dict[Path, ast.Module], skip: Path | None = None) -> list[str]:
    """``path:line: what`` for every private botocore/aiobotocore name the trees use (``skip`` excepted)."""
    vendor_classes = _vendor_classes(trees)
    ours = _defined_private_names({p: t for p, t in trees.items() if p != skip}, own_only=True)
    ours -= set().union(*(_overrides(tree, vendor_classes) for tree in trees.values()))
    found: list[str] = []
    for path, tree in trees.items():
        if path == skip:
            continue
        finder = _Finder(path, ours, vendor_classes, _vendor_bindings(tree))
        finder.visit(tree)
        found += [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for line, what in finder.found]
    return found


def _overrides(tree: ast.Module, vendor_classes: set[str]) -> set[str]:
    """Private names defined inside vendor-derived classes: botocore's names, not ours."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in vendor_classes:
            names |= _defined_private_names({Path(): ast.Module(body=node.body, type_ignores=[])})
    return names


def test_no_private_botocore_attribute_is_named_outside_the_internals_module() -> None:
    found = private_vendor_names(_trees(PACKAGE), skip=INTERNALS)
    assert not found, "private botocore/aiobotocore names outside aws/botocore_internals.py:\n" + "\n".join(found)


def test_the_finder_flags_each_kind_of_access() -> None:
    """The check above can fail: every kind of access it looks for, in a made-up module, is found."""
    source = '''
from botocore import parsers
from botocore.eventstream import EventStream

class Parser(parsers.JSONParser):
    def _do_parse(self, response, shape):
        return self._parse_shape(shape, {})

class Child(Parser):
    def parse(self, response, shape):
        return super()._do_parse(response, shape)

def reach(client, stream):
    stream._event_generator
    getattr(client._endpoint, "_response_parser_factory")
'''
    found = private_vendor_names({PACKAGE / "made_up.py": ast.parse(source)})
    kinds = [line.split(": ", 1)[1] for line in found]
    assert kinds == ["overrides _do_parse", "self._parse_shape", "super()._do_parse", "stream._event_generator",
                     "getattr(..., '_response_parser_factory')", "client._endpoint"]

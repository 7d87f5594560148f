"""YAML read strictly: YAML 1.2 scalars, no duplicate keys, bounded nesting and alias expansion.

PyYAML's ``safe_load`` reads YAML 1.1, where ``off`` and ``no`` are booleans,
``010`` is 8 and ``1:30`` is 90, and ``1e-4`` is a string while ``1.0e-4`` is a
number; a repeated key silently replaces the first; a few lines of nested
aliases (the "billion laughs") expand to billions of values; and ten thousand
``[`` overflow the stack. :func:`load_yaml` reads the YAML 1.2 core schema
(only ``true``/``false`` are booleans, numbers as in JSON), refuses a repeated
key naming both lines, and refuses nesting deeper than
:data:`~nectargan_core.limits.MAX_DEPTH` and documents that would expand to more
than :data:`~nectargan_core.limits.MAX_VALUES` values, before building them.
Problems are raised as ``yaml.MarkedYAMLError`` with the line they are on.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.events import MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .limits import MAX_DEPTH, MAX_VALUES
from .text import printable


MERGE_TAG = "tag:yaml.org,2002:merge"
#: The tags of YAML's core schema (and ``<<`` merges). PyYAML's safe loader also builds ``!!binary`` (bytes),
#: ``!!set``, ``!!omap``, ``!!pairs`` and ``!!timestamp`` values, which a config never holds: given to a text
#: key they became a Python repr (``b'hello'``, a set whose order changed from run to run).
CORE_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq", "merge")}


class StrictYAMLError(yaml.MarkedYAMLError):
    """A document that parses but that NectarGAN refuses (duplicate key, too deep, too large)."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the YAML 1.2 core schema and the guards described above."""

    yaml_implicit_resolvers: dict[Any, Any] = {}

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nodes += 1
        if self._nodes > MAX_VALUES:  # stop reading at once: pure-Python parsing of a huge list takes seconds
            raise StrictYAMLError(problem=f"holds more than {MAX_VALUES} values",
                                  problem_mark=self.peek_event().start_mark)
        nested = self.check_event(MappingStartEvent, SequenceStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise StrictYAMLError(problem=f"nested deeper than {MAX_DEPTH} levels",
                                      problem_mark=self.peek_event().start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            if nested:
                self._depth -= 1

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        self._check_duplicates(node)
        return self.construct_document(node)

    def _check_duplicates(self, root: Node) -> None:
        """Refuse a key given twice in one mapping, naming it by its path and both lines (merges ``<<`` aside)."""
        seen_nodes: set[int] = set()
        stack: list[tuple[Node, str]] = [(root, "")]
        while stack:
            node, path = stack.pop()
            if id(node) in seen_nodes:
                continue
            seen_nodes.add(id(node))
            if node.tag not in CORE_TAGS:
                raise StrictYAMLError(
                    problem=f"the tag {printable(node.tag.replace('tag:yaml.org,2002:', '!!'))}"
                            f"{' at ' + path if path else ''} is not used in configs; write plain text, numbers, "
                            "true/false, lists and mappings",
                    problem_mark=node.start_mark)
            if isinstance(node, SequenceNode):
                stack.extend(reversed([(child, f"{path}[{i}]") for i, child in enumerate(node.value)]))
            elif isinstance(node, MappingNode):
                children: list[tuple[Node, str]] = []
                first_line: dict[Any, int] = {}
                for key_node, value_node in node.value:
                    if not isinstance(key_node, ScalarNode) or key_node.tag == MERGE_TAG:
                        children.append((value_node, path))
                        continue
                    key = self.construct_object(key_node)
                    shown = f"{path}.{printable(key)}" if path else printable(key)
                    line = key_node.start_mark.line + 1
                    if key in first_line:
                        raise StrictYAMLError(
                            problem=f"duplicate key '{shown}' (first at line {first_line[key]}, again at line "
                                    f"{line}); keep one of them",
                            problem_mark=key_node.start_mark)
                    first_line[key] = line
                    children.append((value_node, shown))
                stack.extend(reversed(children))


def check_expansion(root: Node) -> None:
    """Refuse a document that expands to more than MAX_VALUES values, nests too deep through aliases, or is recursive.

    Each node's expanded size and depth are computed once (aliases share nodes),
    so a billion-laughs document costs as many steps as it has lines.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            on_path.discard(key)
            size[key] = min(1 + sum(size[id(c)] for c in children), MAX_VALUES + 1)
            nested = 1 if isinstance(node, (MappingNode, SequenceNode)) else 0
            depth[key] = nested + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_VALUES:
                raise StrictYAMLError(problem=f"expands to more than {MAX_VALUES} values through aliases "
                                              "(an alias bomb?)", problem_mark=node.start_mark)
            if depth[key] > MAX_DEPTH:
                raise StrictYAMLError(problem=f"nested deeper than {MAX_DEPTH} levels through aliases",
                                      problem_mark=node.start_mark)
            continue
        if key in size:
            continue
        if key in on_path:
            raise StrictYAMLError(problem="an alias refers to a node that contains it (a recursive structure)",
                                  problem_mark=node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in size)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


# -- the YAML 1.2 core schema ----------------------------------------------------
INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
                   r"|\.(?:nan|NaN|NAN))$")

StrictLoader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"),
                                   ["~", "n", "N", ""])
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:int", INT, list("-+0123456789"))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT, list("-+.0123456789"))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


def _construct_int(loader: StrictLoader, node: ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    try:
        return int(text)  # "010" is 10, as in YAML 1.2
    except ValueError:
        shown = text if len(text) <= 30 else f"{text[:12]}... ({len(text)} digits)"
        raise StrictYAMLError(problem=f"{shown} is not an integer Python can read (more than 4300 digits?)",
                              problem_mark=node.start_mark) from None


def _construct_float(loader: StrictLoader, node: ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    sign = -1.0 if text.startswith("-") else 1.0
    bare = text.lstrip("+-")
    if bare == ".inf":
        return sign * float("inf")
    if bare == ".nan":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise StrictYAMLError(problem=f"{text!r} is not a number", problem_mark=node.start_mark) from None


StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)


class StrictDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that quotes exactly what :class:`StrictLoader` would read as something else.

    A text such as ``1e3`` is plain in YAML 1.1 but a number in YAML 1.2, so it is
    written quoted; what this writes, :func:`load_yaml` reads back unchanged.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}


for _first, _resolvers in StrictLoader.yaml_implicit_resolvers.items():
    for _tag, _regexp in _resolvers:
        StrictDumper.add_implicit_resolver(_tag, _regexp, [_first])


def load_yaml(text: str) -> Any:
    """The data of one YAML document, read as described in the module docstring."""
    loader = StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def dump_yaml_text(data: Any, **options: Any) -> str:
    """YAML text that :func:`load_yaml` reads back as ``data`` (``yaml.dump`` options pass through)."""
    return yaml.dump(data, Dumper=StrictDumper, **options)

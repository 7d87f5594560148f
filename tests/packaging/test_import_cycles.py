"""No import cycles inside the distributions: every module can be read in an order of its imports.

A cycle (``tester`` imports ``results_page``, which imports ``tester``) means
two modules are one concept split in two, or that a shared name lives in the
wrong one; it also makes import order matter. Imports under
``if TYPE_CHECKING:`` are left out (they never run); imports inside
functions count (they run, later). grimp is import-linter's graph library.
"""

from __future__ import annotations

import grimp

PACKAGES = ("nectargan_core", "nectargan_models", "nectargan_losses", "nectargan_translate", "nectargan_pix2pix",
            "nectargan_cyclegan", "nectargan_visdom", "nectargan_tensorboard")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n in graph.modules)
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_distribution_has_an_import_cycle():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(group) for group in found)


def test_the_check_finds_a_cycle(tmp_path, monkeypatch):
    """Two stand-in modules that import each other (one inside a function) are found; a TYPE_CHECKING one is not."""
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def later():\n    from . import a\n")
    (package / "c.py").write_text("from . import d\n")
    (package / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic_pkg", exclude_type_checking_imports=True, cache_dir=None)
    assert cycles(graph) == [["cyclic_pkg.a", "cyclic_pkg.b"]]

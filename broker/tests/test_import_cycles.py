"""No import circle inside trafka.wire, trafka.storage or trafka.broker: arrows between a package's modules
point one way (the guide: a module takes the narrow thing it uses, not the object above it).

A circle is a strongly connected component of the import graph among one package's modules, built by grimp
(installed with import-linter) from the source: imports inside functions count, as they are dependencies
all the same. Imports under ``if TYPE_CHECKING:`` are checked twice:

- counted (``test_no_import_circle_inside``): an annotation naming ``Broker`` is the dependency the guide
  asks modules not to have, even if it is never imported at run time;
- left out (``test_no_import_circle_at_run_time``): the imports Python executes; no package may have a
  circle there.

A failure names each circle's modules, its shortest loops, and the import lines of every step.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

import grimp
import pytest

PACKAGES = ("trafka.wire", "trafka.storage", "trafka.broker")

Edges = Mapping[str, frozenset[str]]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # cache_dir=None: grimp would otherwise write a cache into the working directory.
    return grimp.build_graph(*PACKAGES, cache_dir=None)


@pytest.fixture(scope="module")
def run_time_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)


def _edges(graph: grimp.ImportGraph, package: str) -> Edges:
    modules = graph.find_descendants(package) | {package}
    return {
        module: frozenset(m for m in graph.find_modules_directly_imported_by(module) if m in modules and m != module)
        for module in modules
    }


def strongly_connected_components(edges: Edges) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative), each sorted, in order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def _shortest_path(edges: Edges, start: str, goal: str, within: set[str]) -> list[str]:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (step := previous[path[-1]]) is not None:
                path.append(step)
            return path[::-1]
        for successor in sorted(edges[node] & within):
            if successor not in previous:
                previous[successor] = node
                queue.append(successor)
    raise AssertionError(f"{goal} is not reachable from {start}")


def shortest_loops(edges: Edges, component: Iterable[str]) -> list[list[str]]:
    """For each import inside ``component``, the shortest loop through it; each loop once, starting from
    its smallest module name."""
    members = set(component)
    loops: set[tuple[str, ...]] = set()
    for importer in sorted(members):
        for imported in sorted(edges[importer] & members):
            loop = [importer, *_shortest_path(edges, imported, importer, members)[:-1]]
            first = loop.index(min(loop))
            loops.add(tuple(loop[first:] + loop[:first]))
    return sorted((list(loop) for loop in loops), key=lambda loop: (len(loop), loop))


def describe_circles(
    package: str, graph: grimp.ImportGraph, run_time_graph: grimp.ImportGraph, components: list[list[str]]
) -> str:
    edges = _edges(graph, package)
    run_time_edges = _edges(run_time_graph, package)

    def short(module: str) -> str:
        return module[len(package) + 1:] or module

    lines = [f"{package} has {len(components)} import circle(s):"]
    for number, component in enumerate(components, 1):
        lines.append("")
        lines.append(f"circle {number}: {len(component)} modules: {', '.join(short(m) for m in component)}")
        lines.append("  shortest loops:")
        for loop in shortest_loops(edges, component):
            lines.append("    " + " -> ".join(short(m) for m in [*loop, loop[0]]))
        lines.append("  imports inside the circle:")
        for importer in component:
            for imported in sorted(edges[importer] & set(component)):
                type_checking = "" if imported in run_time_edges[importer] else "  [TYPE_CHECKING only]"
                lines.append(f"    {short(importer)} -> {short(imported)}{type_checking}")
                details = graph.get_import_details(importer=importer, imported=imported)
                for detail in sorted(details, key=lambda d: d["line_number"]):
                    lines.append(f"      {importer}:{detail['line_number']}  {detail['line_contents']}")
    return "\n".join(lines)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_inside(package: str, graph: grimp.ImportGraph, run_time_graph: grimp.ImportGraph) -> None:
    components = strongly_connected_components(_edges(graph, package))
    assert not components, describe_circles(package, graph, run_time_graph, components)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_at_run_time(package: str, run_time_graph: grimp.ImportGraph) -> None:
    components = strongly_connected_components(_edges(run_time_graph, package))
    assert not components, describe_circles(package, run_time_graph, run_time_graph, components)


def test_the_circle_finder_finds_circles_and_their_loops() -> None:
    edges = {
        "p.a": frozenset({"p.b"}), "p.b": frozenset({"p.c"}), "p.c": frozenset({"p.a", "p.d"}),
        "p.d": frozenset({"p.e"}), "p.e": frozenset({"p.d"}), "p.f": frozenset({"p.a"}),
    }
    assert strongly_connected_components(edges) == [["p.a", "p.b", "p.c"], ["p.d", "p.e"]]
    assert shortest_loops(edges, ["p.a", "p.b", "p.c"]) == [["p.a", "p.b", "p.c"]]
    assert strongly_connected_components({"p.a": frozenset(), "p.b": frozenset({"p.a"})}) == []

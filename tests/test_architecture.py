"""The layers of docs/architecture.md hold: no import cycle between armd's top-level packages.

import-linter's contracts (pyproject.toml) forbid the known wrong directions
one by one; this test catches any cycle, including one through a package
added later, by building the import graph with grimp (import-linter's own
graph library) and looking for a path back from every import's target.
"""

from __future__ import annotations

import grimp

TOP = ("armd.costmodel", "armd.policies", "armd.migrations", "armd.heralds", "armd.control", "armd.adapters", "armd.daemon")


def top_level(module: str) -> str | None:
    return next((p for p in TOP if module == p or module.startswith(p + ".")), None)


def package_edges() -> set[tuple[str, str]]:
    graph = grimp.build_graph("armd", include_external_packages=False)
    edges = set()
    for module in graph.modules:
        source = top_level(module)
        for imported in graph.find_modules_directly_imported_by(module):
            target = top_level(imported)
            if source and target and source != target:
                edges.add((source, target))
    return edges


def test_no_import_cycle_between_top_level_packages() -> None:
    edges = package_edges()
    reach = {p: {t for s, t in edges if s == p} for p in TOP}
    changed = True
    while changed:
        changed = False
        for p in TOP:
            more = set().union(*(reach[q] for q in reach[p])) - reach[p]
            if more:
                reach[p] |= more
                changed = True
    cycles = sorted(p for p in TOP if p in reach[p])
    assert not cycles, f"packages on an import cycle: {cycles}; edges: {sorted(edges)}"


def test_the_core_and_the_control_layer_import_no_daemon_and_no_adapter() -> None:
    edges = package_edges()
    inner = {"armd.costmodel", "armd.policies", "armd.migrations", "armd.heralds", "armd.control"}
    assert not {(s, t) for s, t in edges if s in inner and t in {"armd.adapters", "armd.daemon"}}
    assert ("armd.adapters", "armd.daemon") not in edges

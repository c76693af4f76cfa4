"""The drawing of the package's imports (``docs/architecture-imports.md``), from the real imports.

    python -m bloomqg.tools.import_graph            # rewrite docs/architecture-imports.md
    python -m bloomqg.tools.import_graph --check    # exit 1 when the committed drawing is stale

The imports are read by grimp (what import-linter reads): module-level, function-level
(deferred) and ``TYPE_CHECKING`` imports alike. The first drawing has one box per family (a
package or module directly under ``bloomqg``), grouped by the floors of the layers contract in
``pyproject.toml`` (top floor first); then one drawing per package with its own modules, grouped
by the floors of its own layers contract where it has one (``bloomqg.study``, ``bloomqg.runtime``).
An arrow ``A --> B`` says a module of A imports a module of B. The drawings are Mermaid flowcharts,
which GitHub renders in place.

Nothing is drawn that breaks the contracts: an arrow to a higher floor, or between two families
of a floor whose members must stay independent (``a | b``), or any circle among the boxes of one
drawing, stops the drawing with the imports that cause it. ``lint-imports`` (``make lint``) is
what enforces the contracts; this check keeps the picture from ever showing otherwise.
"""

from __future__ import annotations

import argparse
import graphlib
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bloomqg.store.provenance import REPO_ROOT

PACKAGE = "bloomqg"
PYPROJECT = REPO_ROOT / "pyproject.toml"
DRAWING = REPO_ROOT / "docs" / "architecture-imports.md"
REGENERATE = "python -m bloomqg.tools.import_graph"


class DrawingError(RuntimeError):
    """The imports break what the drawing promises (no upward arrow, no circle)."""


@dataclass(frozen=True)
class Floor:
    """One layer of the layers contract: its families and whether they must stay independent."""

    families: tuple[str, ...]
    independent: bool

    @property
    def label(self) -> str:
        return (" | " if self.independent else " : ").join(self.families)


def _floors_of(contract: Mapping[str, object]) -> list[Floor]:
    result = []
    for layer in contract["layers"]:
        independent = ":" not in layer
        names = tuple(part.strip() for part in re.split(r"[|:]", layer))
        result.append(Floor(names, independent))
    return result


def package_floors(pyproject: Path = PYPROJECT) -> dict[str, list[Floor]]:
    """Each package with a ``layers`` contract of its own (``containers = [package]``): its floors."""
    config = tomllib.loads(pyproject.read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    return {
        contract["containers"][0]: _floors_of(contract)
        for contract in contracts
        if contract.get("type") == "layers" and len(contract.get("containers", ())) == 1
    }


def floors(pyproject: Path = PYPROJECT) -> list[Floor]:
    """The floors of the ``layers`` contract in ``pyproject.toml``, top floor first."""
    config = tomllib.loads(pyproject.read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next((c for c in contracts if c.get("id") == "layers"), None)
    if layers is None:
        raise DrawingError(f"{pyproject}: no import-linter contract with id = \"layers\"")
    return _floors_of(layers)


@dataclass(frozen=True)
class ImportGraph:
    """The modules of the package and every (importer, imported) pair between them."""

    modules: frozenset[str]
    imports: frozenset[tuple[str, str]]


def read_imports(package: str = PACKAGE) -> ImportGraph:
    """The package's modules and imports, as grimp (import-linter's graph builder) reads them."""
    import grimp  # a development dependency, installed with import-linter

    graph = grimp.build_graph(package, cache_dir=None)
    imports = {
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
    }
    return ImportGraph(frozenset(graph.modules), frozenset(imports))


def _child(package: str, module: str) -> str | None:
    """The child of ``package`` that is ``module`` or holds it; None for a module outside."""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1 :].split(".", 1)[0]


def packages_and_children(modules: Iterable[str], package: str = PACKAGE) -> dict[str, set[str]]:
    """Each package under (and including) ``package`` with the names of its children."""
    children: dict[str, set[str]] = {}
    for module in modules:
        parts = module.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent == package or parent.startswith(package + "."):
                children.setdefault(parent, set()).add(parts[depth])
    return children


def sibling_edges(imports: Iterable[tuple[str, str]], package: str) -> dict[tuple[str, str], list[str]]:
    """Arrows between the children of ``package``, each with the module imports behind it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for importer, imported in imports:
        a, b = _child(package, importer), _child(package, imported)
        if a is not None and b is not None and a != b:
            edges.setdefault((a, b), []).append(f"{importer} -> {imported}")
    return {edge: sorted(reasons) for edge, reasons in sorted(edges.items())}


def check_floors(edges: Mapping[tuple[str, str], list[str]], building: list[Floor], children: set[str]) -> None:
    """Every family on one floor; every arrow to the same floor (a ``:`` floor) or one below."""
    level = {family: index for index, floor in enumerate(building) for family in floor.families}
    unplaced = sorted(children - set(level))
    if unplaced:
        raise DrawingError(f"no floor in {PYPROJECT.name}'s layers contract for: {', '.join(unplaced)}")
    wrong = [
        f"{a} -> {b}: " + "; ".join(reasons)
        for (a, b), reasons in edges.items()
        if level[a] > level[b] or (level[a] == level[b] and building[level[a]].independent)
    ]
    if wrong:
        raise DrawingError("imports against the layers (run lint-imports):\n  " + "\n  ".join(wrong))


def check_acyclic(package: str, nodes: Iterable[str], edges: Mapping[tuple[str, str], list[str]]) -> None:
    sorter = graphlib.TopologicalSorter({node: set() for node in nodes})
    for a, b in edges:
        sorter.add(a, b)
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        cycle = error.args[1]
        raise DrawingError(f"a circle among the modules of {package}: {' -> '.join(cycle)}") from None


def _node(name: str) -> str:
    return "m_" + name  # Mermaid ids: never a keyword such as "end"


def _mermaid(
    nodes: Iterable[str], edges: Iterable[tuple[str, str]], groups: Sequence[tuple[str, str, list[str]]] = ()
) -> str:
    lines = ["```mermaid", "flowchart TB"]
    grouped = set()
    for ident, title, members in groups:
        lines.append(f'  subgraph {ident} ["{title}"]')
        lines += [f'    {_node(m)}["{m}"]' for m in members]
        lines.append("  end")
        grouped |= set(members)
    lines += [f'  {_node(n)}["{n}"]' for n in sorted(set(nodes) - grouped)]
    lines += [f"  {_node(a)} --> {_node(b)}" for a, b in edges]
    # Invisible links stack the floors in the contract's order (the layout alone would rank them
    # by their arrows and put independent floors side by side).
    lines += [f"  {upper[0]} ~~~ {lower[0]}" for upper, lower in zip(groups, groups[1:])]
    lines.append("```")
    return "\n".join(lines)


def _floor_groups(package: str, building: list[Floor]) -> list[tuple[str, str, list[str]]]:
    prefix = "" if package == PACKAGE else package.rsplit(".", 1)[1] + "_"
    numbers = range(len(building), 0, -1)
    return [
        (f"{prefix}floor{n}", f"floor {n}: {floor.label}", list(floor.families))
        for n, floor in zip(numbers, building)
    ]


def render(
    graph: ImportGraph | None = None,
    building: list[Floor] | None = None,
    inner: Mapping[str, list[Floor]] | None = None,
) -> str:
    """The Markdown of ``docs/architecture-imports.md`` for the package as it is."""
    graph = read_imports() if graph is None else graph
    building = floors() if building is None else building
    inner = package_floors() if inner is None else inner
    children = packages_and_children(graph.modules)
    top_edges = sibling_edges(graph.imports, PACKAGE)
    check_floors(top_edges, building, children[PACKAGE])
    check_acyclic(PACKAGE, children[PACKAGE], top_edges)
    groups = _floor_groups(PACKAGE, building)
    parts = [
        f"<!-- Generated by `{REGENERATE}` from the package's real imports; do not edit. "
        "tests/unit/test_import_graph.py checks that it is current. -->",
        "# The package's imports",
        "",
        "An arrow `A --> B`: a module of A imports a module of B — at module level, inside a "
        "function, or for type checking alone (grimp reads all three, as `lint-imports` does). "
        "The floors are the layers contract in `pyproject.toml`, top floor first: every arrow "
        "goes down, or sideways on a floor written with `:`; on a floor written with `|` the "
        "families do not import each other. No drawing here has a circle. "
        "[architecture.md](architecture.md) explains the floors.",
        "",
        "## Families",
        "",
        _mermaid(children[PACKAGE], top_edges, groups),
    ]
    for package in sorted(children):
        if package == PACKAGE:
            continue
        edges = sibling_edges(graph.imports, package)
        own = inner.get(package, []) if package != PACKAGE else []
        if own:
            check_floors(edges, own, children[package])
        check_acyclic(package, children[package], edges)
        parts += ["", f"## `{package}`", "", _mermaid(children[package], edges, _floor_groups(package, own))]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 when {DRAWING.name} is not current")
    parser.add_argument("--output", type=Path, default=DRAWING)
    args = parser.parse_args(argv)
    try:
        text = render()
    except DrawingError as error:
        print(f"import_graph: {error}", file=sys.stderr)
        return 1
    if args.check:
        if not args.output.is_file() or args.output.read_text() != text:
            print(f"import_graph: {args.output} is not current; run: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"import_graph: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The drawing of the package's imports (docs/architecture-imports.md): current with the code, and
never drawn over an upward import, a family on no floor, or a circle inside a package."""

from __future__ import annotations

import pytest

from bloomqg.tools.import_graph import DRAWING, REGENERATE, DrawingError, ImportGraph, read_imports, render


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return read_imports()


def with_import(graph: ImportGraph, importer: str, imported: str) -> ImportGraph:
    return ImportGraph(graph.modules | {importer, imported}, graph.imports | {(importer, imported)})


def test_the_committed_drawing_is_current(graph):
    assert DRAWING.read_text() == render(graph), f"{DRAWING} is stale: run {REGENERATE} and commit it"


def test_the_drawing_shows_every_family_and_the_api_modules(graph):
    text = render(graph)
    for family in ("config", "judges", "api", "chat", "config_schema", "frames"):
        assert f'm_{family}["{family}"]' in text
    assert "  m_client --> m_client_core" in text  # inside bloomqg.api
    assert "  m_study --> m_judges" in text  # the top floor sees what it validates
    assert "  m_judges --> m_study\n" not in text


def test_an_upward_import_is_not_drawn(graph):
    upward = with_import(graph, "bloomqg.metrics.counts", "bloomqg.reporting.display")
    with pytest.raises(DrawingError, match=r"metrics -> reporting: bloomqg\.metrics\.counts -> bloomqg\.reporting\.display"):
        render(upward)


def test_an_import_between_independent_families_is_not_drawn(graph):
    sideways = with_import(graph, "bloomqg.study.study_cost", "bloomqg.study.config")  # floor "config | study_cost"
    with pytest.raises(DrawingError, match="study_cost -> config"):
        render(sideways)


def test_a_circle_inside_a_package_is_not_drawn(graph):
    circle = with_import(graph, "bloomqg.api.client_core", "bloomqg.api.client")
    with pytest.raises(DrawingError, match=r"a circle among the modules of bloomqg\.api"):
        render(circle)


def test_a_family_on_no_floor_is_named(graph):
    unplaced = ImportGraph(graph.modules | {"bloomqg.newcomer"}, graph.imports)
    with pytest.raises(DrawingError, match="no floor in pyproject.toml's layers contract for: newcomer"):
        render(unplaced)

"""What `snakemake --report` shows: report/workflow.rst rendered with a config (the gate in its
current keys, never "None"), and the report bundled with its explorer so its links resolve."""

from __future__ import annotations

from types import SimpleNamespace

import jinja2
import pytest

from bloomqg.reporting.bundle import bundle_report
from tests.conftest import REPO
from tests.support.report_zip import broken_links


def render(config: dict) -> str:
    template = jinja2.Template((REPO / "report" / "workflow.rst").read_text(encoding="utf-8"))
    return template.render(snakemake=SimpleNamespace(config=config))


@pytest.mark.parametrize("gate, shown", [
    ({"coefficient": "alpha", "threshold": 0.7, "action": "flag"}, "Krippendorff's α ≥ 0.7 (action: flag)"),
    ({"coefficient": "ac1", "threshold": 0.6, "action": "drop"}, "Gwet's AC1 ≥ 0.6 (action: drop)"),
    ({"alpha": 0.8}, "Krippendorff's α ≥ 0.8 (action: flag)"),  # the older spelling
    (None, "Krippendorff's α ≥ 0.7 (action: flag)"),  # the schema's defaults
])
def test_the_workflow_description_reads_the_gate_in_its_current_keys(gate, shown):
    config = {"models": {"m": {}}, "datasets": {"cs": {}}, "judges": {"rules": {}}}
    if gate is not None:
        config["gate"] = gate
    text = render(config)
    assert f"Reliability gate: {shown}." in text and "None" not in text


def test_the_bundle_keeps_the_reports_links_to_its_explorer(tmp_path):
    (tmp_path / "explorer").mkdir()
    (tmp_path / "report.html").write_text('<a href="explorer/index.html#f.model=m">n=3</a>')
    (tmp_path / "explorer" / "index.html").write_text('<script src="data.js"></script>')
    (tmp_path / "explorer" / "data.js").write_text("var data = {};")
    out = tmp_path / "bundle"
    bundle_report(tmp_path / "report.html", [tmp_path / "explorer" / "index.html", tmp_path / "explorer" / "data.js"], out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "explorer/data.js", "explorer/index.html", "report.html"]
    assert broken_links(out) == []
    (out / "explorer" / "data.js").unlink()
    assert broken_links(out) == [("explorer/index.html", "data.js")]

"""code_fingerprint covers what a stage runs: its modules' source and the files beside it
(templates, static files), so editing the report's template reruns the report; compiled
caches do not count."""

from __future__ import annotations

import sys

import bloomqg.store.provenance as provenance


def test_a_template_beside_the_code_changes_the_fingerprint_and_a_cache_does_not(tmp_path, monkeypatch):
    package = tmp_path / "stagepkg"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    template = package / "templates" / "page.html.j2"
    template.write_text("<p>{{ value }}</p>\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(provenance, "PACKAGE_ROOT", package)
    sys.modules.pop("stagepkg", None)
    before = provenance.code_fingerprint("stagepkg")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0compiled")
    assert provenance.code_fingerprint("stagepkg") == before
    template.write_text("<p>{{ value }}!</p>\n")
    assert provenance.code_fingerprint("stagepkg") != before

"""make setup's installer (.ci/install.py): pip's configuration reaches uv as flags, so both
install the same files from the same sources, and INSTALLER=pip keeps pip."""

from __future__ import annotations

import sys

import pytest

from tests.support.scripts import REPO, load_script


@pytest.fixture(scope="module")
def installer():
    return load_script(".ci/install.py")


LISTING = """\
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/elsewhere'
"""


def test_pip_settings_become_uv_flags(installer) -> None:
    settings = installer.pip_settings(LISTING)
    assert settings == {
        "find-links": ["/opt/wheels"],  # the environment's value wins over the file's, as in pip
        "constraint": ["/etc/xdg/pip/constraints.txt"],
        "extra-index-url": ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"],
    }
    assert installer.uv_flags(settings) == [
        "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels", "--constraint", "/etc/xdg/pip/constraints.txt",
        "--index-strategy", "unsafe-best-match",
    ]


def test_no_pip_configuration_no_flags(installer) -> None:
    assert installer.uv_flags(installer.pip_settings("")) == []
    assert installer.uv_flags(installer.pip_settings("global.index-url='https://mirror/simple'")) == [
        "--index-url", "https://mirror/simple"]


def test_installer_pip_keeps_pip(installer, monkeypatch) -> None:
    monkeypatch.setenv("INSTALLER", "pip")
    assert installer.find_uv(sys.executable) is None


def test_the_makefile_installs_through_it() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "INSTALL = $(PYTHON) .ci/install.py" in makefile
    assert "bin/pip install" not in makefile  # every install goes through the installer

"""The README shows Snakemake users the workflow's direct use beside `make study`: the
workstation profile with --cores, and a cluster profile; every profile and config it names exists."""

from __future__ import annotations

import re
import shlex

from tests.conftest import REPO


def test_readme_shows_snakemake_with_the_profiles_beside_make_study():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## The two commands"):text.index("\n## ", text.index("## The two commands") + 5)]
    assert "make study" in section
    commands = [shlex.split(line.split("#")[0]) for line in section.splitlines()
                if re.match(r"\s*(\.venv/bin/)?snakemake ", line)]
    profiles = {words[words.index("--profile") + 1] for words in commands if "--profile" in words}
    assert {"profiles/default", "profiles/slurm"} <= profiles, commands
    workstation = next(words for words in commands if "profiles/default" in words)
    assert "--cores" in workstation
    for words in commands:
        for flag in ("--profile", "--configfile"):
            if flag in words:
                target = REPO / words[words.index(flag) + 1]
                assert target.exists(), f"README names {target}, which does not exist"
        if "--profile" in words:
            assert (REPO / words[words.index("--profile") + 1] / "config.yaml").is_file()

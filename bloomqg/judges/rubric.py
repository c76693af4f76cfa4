"""The LLM judges' rubric prompt: a template file of chat messages, read and checked once.

The template (``prompts/judge/rubric.md`` by default) is made of chat messages, each introduced
by a ``<!-- role: system|user|assistant -->`` line, with ``${name}`` placeholders
(:class:`string.Template`, so JSON braces need no escaping). :mod:`bloomqg.judges.llm` renders
it for each question; the judge registry and stage only hand it around.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path

from bloomqg.store.provenance import sha256_file

DEFAULT_RUBRIC_PATH = Path(__file__).resolve().parents[2] / "prompts" / "judge" / "rubric.md"

#: Placeholders a rubric template must use (each at least once).
TEMPLATE_FIELDS: tuple[str, ...] = ("domain", "original_question", "question", "knowledge_units")
#: Placeholders a rubric template may use: the Bloom levels in the order presented.
OPTIONAL_TEMPLATE_FIELDS: tuple[str, ...] = ("bloom_levels",)

_ROLE_MARKER = re.compile(r"^<!--\s*role:\s*(system|user|assistant)\s*-->\s*$", re.MULTILINE)


@dataclass(frozen=True)
class RubricTemplate:
    """A parsed rubric template: its parts by role, in file order, and its content hash."""

    path: Path
    parts: tuple[tuple[str, string.Template], ...]
    sha256: str

    @property
    def lists_bloom_levels(self) -> bool:
        """Whether the template renders the Bloom levels from data (``${bloom_levels}``)."""
        return any("bloom_levels" in tpl.get_identifiers() for _, tpl in self.parts)

    @property
    def prompt_hash(self) -> str:
        """First 16 hex digits of the file's sha256 (the project's prompt-hash convention)."""
        return self.sha256[:16]


def load_rubric(path: str | Path | None = None) -> RubricTemplate:
    """Read and check a rubric template (default :data:`DEFAULT_RUBRIC_PATH`)."""
    path = Path(path) if path is not None else DEFAULT_RUBRIC_PATH
    if not path.is_file():
        raise FileNotFoundError(f"judge rubric template {path} not found")
    text = path.read_text(encoding="utf-8")
    markers = list(_ROLE_MARKER.finditer(text))
    if not markers or text[: markers[0].start()].strip():
        raise ValueError(f"judge rubric {path}: must start with a '<!-- role: system|user|assistant -->' line")
    parts = []
    for index, marker in enumerate(markers):
        end = markers[index + 1].start() if index + 1 < len(markers) else len(text)
        parts.append((marker.group(1), string.Template(text[marker.end() : end].strip())))
    if parts[-1][0] != "user":
        raise ValueError(f"judge rubric {path}: the last part must be the user message")
    for role, tpl in parts:
        if not tpl.is_valid():
            raise ValueError(f"judge rubric {path}: a '$' in the {role} part is not a placeholder (write $$)")
    used = {name for _, tpl in parts for name in tpl.get_identifiers()}
    missing = [name for name in TEMPLATE_FIELDS if name not in used]
    unknown = sorted(used - set(TEMPLATE_FIELDS) - set(OPTIONAL_TEMPLATE_FIELDS))
    if missing or unknown:
        raise ValueError(
            f"judge rubric {path}: placeholders missing {missing}, unknown {unknown} "
            f"(allowed: {list(TEMPLATE_FIELDS + OPTIONAL_TEMPLATE_FIELDS)})"
        )
    return RubricTemplate(path=path, parts=tuple(parts), sha256=sha256_file(path))

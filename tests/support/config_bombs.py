"""Config files that Snakemake's own loader expands without end or runs (issue 52, point 4); the
tests and benchmarks/hostile_inputs.py feed them to ``python -m bloomqg.study.config``."""

from __future__ import annotations

from pathlib import Path


def mapping_alias_bomb(levels: int = 9) -> str:
    """Nine mappings of nine aliases of the mapping before, ``levels`` deep: 9**levels values."""
    lines = ["a0: &a0 {" + ", ".join(f"k{i}: x" for i in range(9)) + "}"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} {{" + ", ".join(f"k{i}: *a{level - 1}" for i in range(9)) + "}")
    return "\n".join(lines) + "\n"


def merge_key_bomb(levels: int = 9) -> str:
    """Mappings that merge the mapping before (``<<: *a``) and hold it under nine keys."""
    lines = ["a0: &a0 {" + ", ".join(f"k{i}: x" for i in range(9)) + "}"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} {{<<: *a{level - 1}, "
                     + ", ".join(f"m{i}: *a{level - 1}" for i in range(9)) + "}")
    return "\n".join(lines) + "\n"


USE_YTE = "__use_yte__: true\nseed: ?(__import__('os').getpid())\n"


def write_all(folder: Path) -> dict[str, Path]:
    """Each bomb as a file in ``folder``, by name."""
    texts = {
        "mapping_alias_bomb": mapping_alias_bomb(),
        "merge_key_bomb": merge_key_bomb(),
        "use_yte": USE_YTE,
        "50MB_string": "seed: 1\nnote: " + "x" * 50_000_000 + "\n",
        "long_value": "seed: 1\nlabel: " + "y" * 20_000 + "\n",
        "deep_nesting": "a: " + "[" * 40 + "]" * 40 + "\n",
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(text)
    return paths

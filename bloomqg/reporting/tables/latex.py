"""A :class:`~bloomqg.reporting.tables.model.Table` as LaTeX: a ``table`` environment with booktabs
rules (needs ``\\usepackage{booktabs}``), special characters escaped.
"""

from __future__ import annotations

import re

from bloomqg.reporting.tables.model import Table


#: Wider LaTeX tables use ``table*`` (spanning both columns of a two-column paper).
MAX_COLUMNS_SINGLE_WIDTH = 7

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "–": "--",
    "−": "$-$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "Δ": r"$\Delta$",
    "δ": r"$\delta$",
    "α": r"$\alpha$",
    "·": r"$\cdot$",
    "†": r"$^{\dagger}$",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


#: Line breaks and other white space controls: a blank line ends a paragraph, which no cell and
#: no ``\multicolumn{…}`` argument may hold (the table stops compiling), so all become one space.
_LATEX_BREAKS = re.compile(r"[\n\r\t\f\v\x85\u2028\u2029]+")
#: Other control characters: no font has them, and ``^^@`` and the like stop pdflatex.
_LATEX_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters, map the few non-ASCII symbols the tables use, and write
    line breaks (a blank line above all) as one space and other control characters not at all."""
    text = _LATEX_CONTROLS.sub("", _LATEX_BREAKS.sub(" ", text))
    return _LATEX_PATTERN.sub(lambda m: _LATEX_SPECIAL[m.group(0)], text)


def render_latex(table: Table) -> str:
    """A booktabs ``table`` environment; grouped columns get ``\\multicolumn`` and ``\\cmidrule``."""
    n_stub = len(table.stub_columns)
    spec = "l" * n_stub + "r" * len(table.columns)
    environment = "table*" if len(table.columns) > MAX_COLUMNS_SINGLE_WIDTH else "table"
    lines = [
        f"% bloomqg table: {table.name} (requires \\usepackage{{booktabs}})",
        f"\\begin{{{environment}}}[htbp]",
        r"\centering",
        r"\small",
        f"\\caption{{{latex_escape(table.caption)}}}",
        f"\\label{{tab:{table.name}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
    ]
    if table.groups and any(label for label, _ in table.groups):
        parts, rules, column = ["" for _ in range(n_stub)], [], n_stub + 1
        for label, span in table.groups:
            if label:
                parts.append(f"\\multicolumn{{{span}}}{{c}}{{{latex_escape(label)}}}")
                rules.append(f"\\cmidrule(lr){{{column}-{column + span - 1}}}")
            else:
                parts += [""] * span
            column += span
        lines.append(" & ".join(parts) + r" \\")
        lines.append(" ".join(rules))
    lines.append(" & ".join(latex_escape(c) for c in [*table.stub_columns, *table.columns]) + r" \\")
    lines.append(r"\midrule")
    for row in table.rows:
        lines.append(" & ".join(latex_escape(c.text) + (r"$^{\dagger}$" if c.gated else "") for c in row) + r" \\")
    lines.append(r"\bottomrule")
    lines.append(r"\end{tabular}")
    for note in table.notes:
        lines.append(r"\par\smallskip{\footnotesize " + latex_escape(note) + "}")
    lines.append(f"\\end{{{environment}}}")
    return "\n".join(lines) + "\n"

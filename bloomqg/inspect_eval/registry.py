"""What the ``inspect_ai`` entry point of the installed package loads (pyproject.toml,
``[project.entry-points.inspect_ai]``): importing the scorer and the task registers them, so that
``inspect eval bloomqg/questions`` and ``--scorer bloomqg/bloomqg_panel`` find them by name."""

from bloomqg.inspect_eval.panel import bloomqg_panel
from bloomqg.inspect_eval.questions import questions

__all__ = ["bloomqg_panel", "questions"]

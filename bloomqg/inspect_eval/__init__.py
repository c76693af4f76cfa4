"""bloomqg inside Inspect: the judging panel as a scorer, the question-writing task, and the
entry point that registers both under the ``bloomqg/`` namespace (docs/inspect.md).

- :mod:`bloomqg.inspect_eval.panel`: ``bloomqg/bloomqg_panel``, for ``inspect eval … --scorer``
  and ``inspect score LOG --scorer bloomqg/bloomqg_panel``;
- :mod:`bloomqg.inspect_eval.questions`: ``bloomqg/questions``, bloomqg's prompts of one dataset
  and strategy under ``inspect eval`` with any Inspect model;
- :mod:`bloomqg.inspect_eval.registry`: what the ``inspect_ai`` entry point of the installed
  package loads.

inspect_ai is imported here at module level: nothing else in bloomqg imports this package.
"""

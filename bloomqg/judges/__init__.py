"""The judge panel: offline judges (``rules``, ``embedding``) and LLM judges on one rubric.

- :mod:`bloomqg.judges.base` — the :class:`~bloomqg.judges.base.Judge` protocol: one batch
  call over :class:`~bloomqg.judges.base.JudgeItem` s, one
  :class:`~bloomqg.judges.base.JudgedItem` (verdict and call numbers) per item.
- :mod:`bloomqg.judges.registry` — :class:`~bloomqg.judges.registry.JudgeBackend` and the
  backends found in :mod:`bloomqg.judges.backends` (one module per backend: its config keys,
  resources, threads, needs and factory).
- :mod:`bloomqg.judges.stage` — :func:`~bloomqg.judges.stage.judge_questions`, the stage entry
  point: one judge's verdicts on a cell's generated questions, five rows per question.
- :mod:`bloomqg.judges.all_cells` — :func:`~bloomqg.judges.all_cells.judge_all_cells`: a judge
  that loads a model (or an engine's server) judges every cell with it, loaded once.
- :mod:`bloomqg.judges.verdict` — :class:`~bloomqg.judges.verdict.Verdict`, the verdict JSON
  schema and the pure parser :func:`~bloomqg.judges.verdict.parse_verdict`.
- :mod:`bloomqg.judges.rules` — transparent heuristics (verb list, lexical similarity, …).
- :mod:`bloomqg.judges.embedding` — sentence-embedding similarities (MiniLM by default).
- :mod:`bloomqg.judges.llm` — the rubric prompt and the LLM judge over any TextGenerator.

Heavy dependencies (sentence-transformers, torch) are imported only by the backend that needs
them, so importing this package is cheap.
"""

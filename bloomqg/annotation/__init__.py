"""Validating the raters: expert annotation against the judge panel (the paper's Table 9) and
any judge measured against the paper's panel on its release.

- :mod:`~bloomqg.annotation.agreement` — percent agreement, Cohen's κ, Krippendorff's α,
  bootstrap CIs, confusion counts (pure).
- :mod:`~bloomqg.annotation.sample` — stratified samples per cell; the annotation key.
- :mod:`~bloomqg.annotation.form` — the blank sheet and the self-contained HTML form.
- :mod:`~bloomqg.annotation.sheets` — reading filled sheets back, with checks.
- :mod:`~bloomqg.annotation.panel_agreement` — annotators vs the panel, per cell and criterion.
- :mod:`~bloomqg.annotation.judge_validation` — a configured judge vs the release's panel.
- :mod:`~bloomqg.annotation.reporting` — Table 9, its figure, the judge-validation summary.
- :mod:`~bloomqg.annotation.settings` — the ``annotation`` / ``judge_validation`` config sections.
"""

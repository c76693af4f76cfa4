"""The paper's tables, written as CSV, Markdown (GitHub pipe tables), LaTeX (booktabs) and JSON.

Every table is first built as a :class:`Table`: a caption, optional column groups (e.g.
"cs, CoT"), the display cells, footnotes and a machine-readable frame. The renderers then
write the same content four ways:

- ``<name>.csv``: tidy-ish numbers with separate ``_ci_low``/``_ci_high``/``_alpha_gated``
  columns, for re-analysis;
- ``<name>.md``: a bold caption line, a GitHub pipe table (a grouped header is written as
  ``group<br>column``), footnotes;
- ``<name>.tex``: a ``table`` environment with booktabs rules (needs ``\\usepackage{booktabs}``),
  special characters escaped;
- ``<name>.json``: the table's :class:`~bloomqg.reporting.tables.view.TableView` (caption, header,
  cell texts, footnotes), which the HTML report reads back.

Values carry their confidence interval where the table has room ("90.40 [88.1, 92.3]"); a value
fed by a judging criterion that failed the α gate is marked with a dagger and a footnote.

Table files (:data:`~bloomqg.reporting.tables.write.TABLE_STEMS`):

====================================  =========================================================
``table1_datasets``                   items per Bloom level and knowledge-unit count (Table 1)
``table4_quality``                    unique / readable / answerable per model × cell (Table 4)
``table5_usability``                  usability / CatCons / KnowCov (Table 5)
``table6_cognitive_shift``            CogReg / CogDrift / CogLeap (Table 6)
``table7_quality_by_dataset``         Table 4 per dataset, the strategies side by side (Table 7)
``table8_shift_by_dataset``           Table 6 per dataset, the strategies side by side (Table 8)
``table_auxiliary``                   CogShift, classification and knowledge-identification
``table_reliability``                 α, AC1 and prevalence per criterion and cell, gate state
``table_judges``                      each judge's agreement with the majority and parse failures
``table_parse_failures``              generation parse-failure rate per model × cell
``table_paired``                      paired strategy-vs-strategy tests, raw and Holm p (a note when none)
``table9_human_agreement``            agreement with human experts (only when given; Table 9)
====================================  =========================================================

Modules: :mod:`~bloomqg.reporting.tables.model` (the :class:`~bloomqg.reporting.tables.model.Table`
and formatting), :mod:`~bloomqg.reporting.tables.builders` and :mod:`~bloomqg.reporting.tables.human`
(building), :mod:`~bloomqg.reporting.tables.markdown`, :mod:`~bloomqg.reporting.tables.latex` and
:mod:`~bloomqg.reporting.tables.view` (rendering), :mod:`~bloomqg.reporting.tables.write` (every
table of a run, :data:`TABLE_FILES` and the optional :data:`HUMAN_TABLE_FILES`).
"""

"""The paper's figures (PNG at 200 dpi and SVG), drawn with matplotlib's object API (Agg).

:func:`~bloomqg.reporting.figures.write.write_figures` always writes every file of
:data:`~bloomqg.reporting.figures.write.FIGURE_FILES` (the workflow declares
them as outputs); a view without data is drawn as an honest "no data for this view" panel saying
why, never skipped. Colours follow the Okabe–Ito colour-blind-safe palette; text is at least
7 pt so single-panel figures stay legible at a column width of about 3.5 in.

=====================  ==========================================================================
``fig2_transitions``   alluvial bands original → judged Bloom level, one panel per model × cell
``fig3_shift_scores``  mean shift score of CogReg / CogDrift / CogLeap per model, one row per strategy
``fig4_knowledge_id``  knowledge-identification accuracy (CoT) per model, with 95% CIs
``fig5_correlations``  classification acc. vs CatCons and knowledge-ID acc. vs KnowCov
``fig6_confusion``     original vs classified (CoT) and original vs judged level, per model
``reliability``        Krippendorff's α per criterion and cell, with CI and the gate line
``parse_failures``     generation and judge parse-failure rates
=====================  ==========================================================================

pyplot is never imported: figures are :class:`matplotlib.figure.Figure` objects saved directly,
so no global backend or state is touched.

Bars, heat-map cells and alluvial bands that stand for a set of questions link to the item
explorer filtered to them: real links in the SVG, and ``<stem>.links.json`` with their boxes on
the PNG, which the HTML report lays over the image (:mod:`~bloomqg.reporting.figures.links`).

Modules: :mod:`~bloomqg.reporting.figures.style` (sizes, palette, empty panels, heat-map cells),
:mod:`~bloomqg.reporting.figures.links` (marks to explorer links), one module per kind of
figure, and :mod:`~bloomqg.reporting.figures.write` (every figure of a run).
"""

"""What a run reports: the paper's tables, its figures and one self-contained HTML report.

- :mod:`~bloomqg.reporting.display`: labels and orders shared by all three (metric labels,
  units and decimals are each metric's own spec, :mod:`bloomqg.metrics.registry`)
- :mod:`~bloomqg.reporting.tables`: building tables, rendering them as Markdown and LaTeX, writing
- :mod:`~bloomqg.reporting.figures`: one module per kind of figure, their style, writing
- :mod:`~bloomqg.reporting.readings`: one sentence per figure and table, from the data
- :mod:`~bloomqg.reporting.examples`, :mod:`~bloomqg.reporting.provenance_view`: what the report
  shows besides them
- :mod:`~bloomqg.reporting.report`: assembling and rendering the HTML page
"""

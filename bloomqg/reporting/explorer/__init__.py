"""The item explorer: one browsable row per generated question, written beside the report.

- :mod:`~bloomqg.reporting.explorer.items`: the item table (what each column holds) built from
  the votes, generations, judgments and reliability of a run, with each item's membership in
  every metric's numerator and denominator (the metrics' own row terms);
- :mod:`~bloomqg.reporting.explorer.encode`: the table as compressed columnar data;
- :mod:`~bloomqg.reporting.explorer.links`: the URL fragment that opens the explorer on the
  items behind a (model, dataset, strategy, metric) number;
- :mod:`~bloomqg.reporting.explorer.write`: the page, its script, style and data file.

The page works opened as ``file://``: the data is a ``<script src>`` file (no fetch), decoded
with the browser's ``DecompressionStream``; nothing is requested from a network.
"""

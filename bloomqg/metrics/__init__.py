"""Bloom-aware metrics over votes frames: values, bootstrap CIs, transitions, correlations, tests.

Every function is pure: DataFrames in (columns of :data:`bloomqg.store.frames.VOTES`,
:data:`bloomqg.store.frames.RELIABILITY` or :data:`bloomqg.store.frames.METRICS`), DataFrames out. The
definitions follow the paper as pinned down against its release (``DESIGN.md``, "Definitions");
the choices the paper leaves open are stated once, in the module computing the metric.

One module per family of metrics, each declaring a :class:`~bloomqg.metrics.spec.MetricSpec`
(name, label, unit, percent or count, decimals, higher-is-better, α-gate criteria, paper table)
beside the code that computes it:

- :mod:`~bloomqg.metrics.quality`: unique, readable, answerable, usability
- :mod:`~bloomqg.metrics.cognitive`: CatCons, CogShift, CogReg / CogDrift / CogLeap
- :mod:`~bloomqg.metrics.knowcov`: KnowCov
- :mod:`~bloomqg.metrics.auxiliary`: classification and knowledge-ID accuracy, parse failures
- :mod:`~bloomqg.metrics.counts`: questions generated and useful

:mod:`~bloomqg.metrics.registry` lines the specs up; :mod:`~bloomqg.metrics.cell` scores one
cell (:func:`~bloomqg.metrics.cell.score_cell`) with :mod:`~bloomqg.metrics.intervals`'s
bootstrap; :mod:`~bloomqg.metrics.transitions`, :mod:`~bloomqg.metrics.correlations` and
:mod:`~bloomqg.metrics.paired` compute what the figures and the paired tests need.
"""

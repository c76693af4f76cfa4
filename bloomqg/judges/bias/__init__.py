"""Judges under test: bias probes run through the judges' own backends (target ``judge_bias``).

A judge that agrees with the others can still be biased. Each judge named in the config's
``judge_bias:`` section is run, exactly as ``judge_questions`` runs it (same backend, call
cache and budget), on a seeded sample of each cell's generated questions, three times:

- ``base``: the rubric as judge_questions renders it (lists in canonical order, the study's
  seed): for an API judge the very call judge_questions made, so it is a cache hit;
- ``repeat``: the same prompt with another seed, at the judge's own temperature;
- ``order``: the Bloom levels and the knowledge units listed in a permuted order (a cyclic
  Latin square of the six levels over six groups of questions, so each level stands at each
  position equally often; one seeded permutation of the units).

Modules:

- :mod:`bloomqg.judges.bias.design` — the sample, the permutations and the probe plan (pure);
- :mod:`bloomqg.judges.bias.probe` — :func:`~bloomqg.judges.bias.probe.probe_judge`, the stage;
- :mod:`bloomqg.judges.bias.stats` — the estimates: order (share of verdicts changed, its excess
  over the repeat probe's, the position of the chosen level), consistency (self-agreement),
  self-preference (by the ``family`` of judges and generators) and length (point-biserial and
  Spearman correlations), each with a confidence interval.
"""

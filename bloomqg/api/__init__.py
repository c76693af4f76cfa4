"""Paid chat-completion calls at study scale.

- :mod:`~bloomqg.api.client`: the client facade (cache lookups, de-duplication, the runner)
- :mod:`~bloomqg.inputs.api_settings`: the client's settings, checked against the config schema
- :mod:`~bloomqg.api.client_core`: what the runners share (counts, spend, the hand-over of rows)
- :mod:`~bloomqg.api.sync` / :mod:`~bloomqg.api.batch`: concurrent chat calls, or the Batch API
- :mod:`~bloomqg.api.transport`: the official ``openai`` SDK, its errors mapped to ours
- :mod:`~bloomqg.api.retry`: which failures are retried, how long to wait, which are fatal
- :mod:`~bloomqg.api.pacing`: token buckets for rpm/tpm and the shared 429 cool-down
- :mod:`~bloomqg.api.wire`: a call's request body and the reading of its answer
- :mod:`~bloomqg.api.cache`: the content-addressed call cache
- :mod:`~bloomqg.api.budget` / :mod:`~bloomqg.api.estimate`: the spend cap and the cost estimate
  of a set of calls (a study's: :mod:`bloomqg.study.study_cost`)
- :mod:`~bloomqg.api.ledger`: the per-judge token/cost ledger of a finished run

Nothing is imported here: the analysis steps import :mod:`bloomqg.api.ledger` without pulling
in the SDK.
"""

"""Paid chat-completion calls at study scale: the OpenAI SDK client with pacing and retries
(:mod:`~bloomqg.api.client`), the content-addressed call cache (:mod:`~bloomqg.api.cache`),
the Batch API runner (:mod:`~bloomqg.api.batch`), the spend cap and cost estimate
(:mod:`~bloomqg.api.budget`) and the per-judge token/cost ledger of a finished run
(:mod:`~bloomqg.api.ledger`).

Nothing is imported here: the analysis steps import :mod:`bloomqg.api.ledger` without pulling
in the SDK.
"""

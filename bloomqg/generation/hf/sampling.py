"""Next-token choice of the decode loops: greedy, or inverse-CDF sampling from each row's own
random stream (temperature, exact top-p), so a row's text does not depend on the other rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.batching import request_seed

#: Candidates top-p sampling examines before falling back to sorting the whole vocabulary.
TOP_P_CANDIDATES = 512


def draw_uniforms(requests: Sequence[ChatRequest], params: DecodingParams, device: Any) -> Any:
    """One row of ``max_new_tokens`` uniform draws per request, from its own CPU stream (None
    for greedy decoding)."""
    import torch

    if not params.do_sample or params.temperature <= 0:
        return None
    draws = [torch.rand(params.max_new_tokens,
                        generator=torch.Generator().manual_seed(request_seed(params.seed, r.request_id)))
             for r in requests]
    return torch.stack(draws).to(device)


def sample_tokens(logits: Any, uniform: Any, params: DecodingParams) -> Any:
    """Next token per row: greedy, or nucleus sampling with each row's own uniform draw.

    Each row inverts the CDF of its (temperature-scaled, top-p truncated) distribution at
    its uniform, so a row's token depends only on its logits and its own random stream.
    Top-p looks at the :data:`TOP_P_CANDIDATES` most likely tokens first (``topk`` is far
    cheaper than sorting the vocabulary for every row at every step, which took a third of a
    CPU decode step); rows whose nucleus is not inside them fall back to a full sort, so the
    result is exact.  The only host round trip is that check, and only under top-p.
    """
    import torch

    if uniform is None:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p >= 1.0:
        cdf = probs.cumsum(dim=-1)
        picked = torch.searchsorted(cdf, (uniform * cdf[:, -1])[:, None])
        return picked.squeeze(1).clamp(max=probs.shape[-1] - 1)
    k = min(TOP_P_CANDIDATES, probs.shape[-1])
    top_probs, top_ids = probs.topk(k, dim=-1)
    tokens = _nucleus_pick(top_probs, top_ids, uniform, params.top_p)
    wide = top_probs.sum(dim=-1) < params.top_p
    if bool(wide.any()):  # flat distributions: the nucleus is wider than k
        sorted_probs, sorted_ids = probs[wide].sort(dim=-1, descending=True)
        tokens[wide] = _nucleus_pick(sorted_probs, sorted_ids, uniform[wide], params.top_p)
    return tokens


def _nucleus_pick(sorted_probs: Any, sorted_ids: Any, uniform: Any, top_p: float) -> Any:
    """Inverse-CDF sampling within the top-p nucleus of rows sorted by descending probability.

    A token is kept while the mass strictly before it is below ``top_p`` (as transformers'
    ``TopPLogitsWarper`` does); the most likely token is always kept.
    """
    import torch

    width = sorted_probs.shape[-1]
    cumulative = sorted_probs.cumsum(dim=-1)
    threshold = torch.full((sorted_probs.shape[0], 1), top_p, dtype=cumulative.dtype,
                           device=cumulative.device)
    kept = (torch.searchsorted(cumulative, threshold) + 1).clamp(1, width)
    in_nucleus = torch.arange(width, device=cumulative.device)[None, :] < kept
    cdf = (sorted_probs * in_nucleus).cumsum(dim=-1)
    index = torch.searchsorted(cdf, (uniform[:, None] * cdf[:, -1:]).contiguous())
    index = torch.minimum(index, kept - 1)
    return sorted_ids.gather(1, index).squeeze(1)

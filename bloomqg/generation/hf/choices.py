"""Scoring continuations of chat prompts: the forward passes behind the ``choices`` judge mode.

lm-evaluation-harness's ``loglikelihood`` request, batched the way this backend batches
generation: for a batch of prompts and a list of continuations (each a ``context`` read but not
scored and a ``scored`` text), the log-probability of every continuation's scored tokens after
every prompt, computed in three levels of shared work:

1. the tokens every prompt of the batch starts with (chat template, the rubric, its worked
   examples: most of a judge prompt) run once, as one row (:func:`kv_cache.prefill_shared_prefix`);
2. each prompt's own tokens, all but its last, run once per prompt, left-padded as in
   :func:`bloomqg.generation.hf.decode.decode_cached` (``[shared prefix][left padding][own part]``);
3. each (prompt, context) pair as one row of ``[last prompt token][context]`` on a copy of its
   prompt's cache rows (right padding at the end of a row is masked and never read): its last
   position's log-softmax scores the first token of every option with that context, so a
   one-token option (``true``) costs no row of its own. The last prompt token travels with the
   contexts because its logits predict their first token;
4. each option of several tokens as one row of its tokens but the last, on a copy of its
   context row: position j scores token j + 1.

The rows of levels 3 and 4 are chunked so a chunk's cache copies stay near
:data:`ROW_TOKENS_PER_PREFILL_CHUNK` times the backend's prefill chunk.

Tokenisation follows lm-evaluation-harness: the scored tokens are those of ``context + scored``
after the tokens of ``context`` alone, so a merge across the seam (``"`` + ``Apply``) is
tokenised as the model would have written it; when the joint encoding does not start with the
context's, the two are encoded apart.
"""

from __future__ import annotations

# torch and the KV cache module load inside the functions: importing the backend stays cheap.

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.inputs.chat import Continuation, ContinuationScore
from bloomqg.generation.hf.decode import Decoder, left_padded, nonfinite_logits_error, prefill_prompts

#: Cache rows × tokens of one chunk of continuation rows, in units of the prefill chunk: on a
#: CPU (2,048-token chunks) about 8k token-rows, 380 MB of cache copies for SmolLM2-135M.
ROW_TOKENS_PER_PREFILL_CHUNK = 4


@dataclass(frozen=True)
class TokenizedContinuation:
    """A continuation's token ids: ``context`` (read, not scored), then ``scored``."""

    context: tuple[int, ...]
    scored: tuple[int, ...]


def tokenize_continuation(tokenizer: Any, continuation: Continuation) -> TokenizedContinuation:
    """Token ids of a continuation, the scored ones as the joint text tokenises them."""

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    context = ids(continuation.context)
    joint = ids(continuation.context + continuation.scored)
    scored = joint[len(context):] if joint[: len(context)] == context else ids(continuation.scored)
    if not scored:
        raise ValueError(f"continuation {continuation.scored!r} encodes to no token")
    return TokenizedContinuation(tuple(context), tuple(scored))


def score_batch(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
) -> list[list[ContinuationScore]]:
    """For each encoded prompt, the score of each continuation (the four levels above)."""
    import torch

    from bloomqg.generation.hf import kv_cache

    if any(len(tokens) < 1 for tokens in encoded):
        raise ValueError("every prompt needs at least one token")
    rows = len(encoded)
    shared = kv_cache.shared_prefix_length(encoded)
    if shared < kv_cache.MIN_SHARED_PREFIX_TOKENS:
        shared = 0
    own = [list(tokens[shared:-1]) for tokens in encoded]
    width = max(len(tokens) for tokens in own)
    with torch.inference_mode():
        if width:
            input_ids, own_mask = left_padded(decoder, own)
        else:  # every prompt is the shared prefix plus its last token
            input_ids = own_mask = torch.zeros((rows, 0), dtype=torch.long, device=decoder.input_device)
        positions = shared + (own_mask.cumsum(dim=-1) - 1).clamp(min=0)
        attention = torch.cat([own_mask.new_ones((rows, shared)), own_mask], dim=-1)
        # the position of each prompt's last token, which opens its continuation rows
        next_position = shared + own_mask.sum(dim=-1)
        capacity = max(1, shared + width)
        cache, _ = prefill_prompts(decoder, encoded[0][:shared], input_ids, attention, positions, capacity)
        states = ([(layer.keys, layer.values) for layer in cache.layers] if shared + width
                  else None)
        contexts = sorted({c.context for c in continuations}, key=[c.context for c in continuations].index)
        pairs = [(row, context) for row in range(rows) for context in contexts]
        scores: list[dict[int, ContinuationScore]] = [{} for _ in range(rows)]
        longest = 1 + max(len(c.context) + len(c.scored) for c in continuations)
        budget = ROW_TOKENS_PER_PREFILL_CHUNK * decoder.prefill_chunk_tokens
        per_chunk = max(1, budget // (shared + width + longest))
        for start in range(0, len(pairs), per_chunk):
            _score_contexts(decoder, encoded, continuations, pairs[start : start + per_chunk],
                            _Rows(states, attention, next_position), scores, capacity + longest, per_chunk)
    decoder.stats["prefill_tokens"] += rows * width + shared
    decoder.stats["shared_prefix_tokens_saved"] += max(rows - 1, 0) * shared
    return [[row_scores[index] for index in range(len(continuations))] for row_scores in scores]


@dataclass(frozen=True)
class _Rows:
    """Cache rows to extend: per layer keys and values (None: nothing cached yet), each row's
    attention mask over them, and the position its next token takes."""

    states: Any
    attention: Any
    next_position: Any


def _extend(decoder: Decoder, parent: _Rows, parents: Sequence[int], sequences: Sequence[Sequence[int]],
            capacity: int) -> tuple[Any, _Rows]:
    """Run each of ``sequences`` (right-padded) on a copy of its parent cache row: the
    log-softmax at every position, and the extended rows (padding masked)."""
    import torch

    from bloomqg.generation.hf import kv_cache

    device = decoder.input_device
    width = max(len(tokens) for tokens in sequences)
    input_ids = torch.full((len(sequences), width), decoder.pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for position, tokens in enumerate(sequences):
        input_ids[position, : len(tokens)] = torch.tensor(list(tokens), dtype=torch.long)
        mask[position, : len(tokens)] = 1
    input_ids, mask = input_ids.to(device), mask.to(device)
    rows = torch.tensor(list(parents), device=device)
    cache = (kv_cache.cache_of_rows(decoder.model.config, parent.states, rows, capacity)
             if parent.states is not None else kv_cache.decode_cache(decoder.model.config, capacity))
    positions = parent.next_position[rows][:, None] + torch.arange(width, device=device)[None, :]
    attention = torch.cat([parent.attention[rows], mask], dim=-1)
    logits = decoder.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                           **{decoder.plan.cache_keyword: cache}).logits.float()
    if not bool(torch.isfinite(logits).all()):
        raise nonfinite_logits_error(decoder.model_id, "while scoring continuations")
    extended = _Rows([(layer.keys, layer.values) for layer in cache.layers], attention,
                     parent.next_position[rows] + mask.sum(dim=-1))
    return torch.log_softmax(logits, dim=-1), extended


def _score_contexts(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
    chunk: Sequence[tuple[int, tuple[int, ...]]],
    prompts: _Rows,
    scores: list[dict[int, ContinuationScore]],
    capacity: int,
    per_chunk: int,
) -> None:
    """Score every continuation of one chunk of (prompt row, context) pairs into ``scores``.

    Each pair runs ``[last prompt token][context]`` once: its last position's log-softmax gives
    the first scored token of every continuation with that context (a one-token option needs no
    more). Options of more tokens then run their tokens but the last on copies of that row."""
    logprobs, contexts = _extend(decoder, prompts, [row for row, _ in chunk],
                                 [[encoded[row][-1], *context] for row, context in chunk], capacity)
    tails: list[tuple[int, int]] = []  # (chunk row, continuation index) of options of several tokens
    for position, (row, context) in enumerate(chunk):
        last = logprobs[position, len(context)]  # the context row's last real position
        for index, continuation in enumerate(continuations):
            if continuation.context != context:
                continue
            scores[row][index] = ContinuationScore(float(last[continuation.scored[0]]), len(continuation.scored))
            if len(continuation.scored) > 1:
                tails.append((position, index))
    for start in range(0, len(tails), per_chunk):
        part = tails[start : start + per_chunk]
        tail_logprobs, _ = _extend(decoder, contexts, [position for position, _ in part],
                                   [continuations[index].scored[:-1] for _, index in part], capacity)
        for offset, (position, index) in enumerate(part):
            scored = continuations[index].scored
            # position j of the tail predicts scored token j + 1
            rest = sum(float(tail_logprobs[offset, j, token]) for j, token in enumerate(scored[1:]))
            row = chunk[position][0]
            first = scores[row][index]
            scores[row][index] = ContinuationScore(first.logprob + rest, first.n_tokens)

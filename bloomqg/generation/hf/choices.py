"""Scoring continuations of chat prompts: the forward passes behind the ``choices`` judge mode.

lm-evaluation-harness's ``loglikelihood`` request, batched the way this backend batches
generation: for a batch of prompts and a list of continuations (each a ``context`` read but not
scored and a ``scored`` text), the log-probability of every continuation's scored tokens after
every prompt.

Tree rows (:func:`score_batch_tree`, SDPA and eager attention).  Every prompt is followed by the
same continuations, so their tokens form one prefix tree (:func:`continuation_tree`): a node per
distinct prefix of ``context + scored`` but the last token (the ``{"bloom_level": "`` context
once for its six options, options that share a first token once). The batch runs

1. the tokens every prompt of the batch starts with (chat template, the rubric, its worked
   examples: most of a judge prompt) once, as one row (:func:`kv_cache.prefill_shared_prefix`),
   seeded into every row's cache;
2. one row per prompt, ``[shared prefix][left padding][own tokens][tree]``, in column chunks:
   a custom 4D mask lets each tree node see the whole prompt and its own ancestors only, and its
   position id continues from its prompt's last token by its depth, so every node computes what
   it would at the end of its own sequence. Left padding puts the tree at the same columns in
   every row, so the head (``logits_to_keep``) runs only at the columns whose next-token
   log-probability is read: the prompt's last token and the nodes that precede a scored token.

No cache row is copied beyond the shared prefix's seeding, and no logits are computed over the
vocabulary at positions that are not read.

Per-row copies (:func:`score_batch_per_row`, attention that ignores a custom mask:
FlashAttention-2 reads only which tokens are padding).  Levels 1 and 2 as above without the tree
(each prompt's own tokens but its last), then

3. each (prompt, context) pair as one row of ``[last prompt token][context]`` on a copy of its
   prompt's cache rows (right padding at the end of a row is masked and never read): its last
   position's log-softmax scores the first token of every option with that context;
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
from bloomqg.generation.hf.model_support import cache_not_filled_error

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


@dataclass(frozen=True)
class ContinuationTree:
    """The continuations of a batch as a prefix tree of tokens that are read.

    Node ``n`` is token ``tokens[n]`` after node ``parents[n]`` (-1: after the prompt's last
    token), ``depths[n]`` tokens after the prompt's last token; parents come before their
    children. ``reads[k]`` lists, for continuation ``k``'s scored tokens in order, the node whose
    next-token distribution scores it (-1: the prompt's last token) and the token.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    depths: tuple[int, ...]
    reads: tuple[tuple[tuple[int, int], ...], ...]


def continuation_tree(continuations: Sequence[TokenizedContinuation]) -> ContinuationTree:
    """The prefix tree of every continuation's ``context + scored`` but its last token (which is
    only read, never run)."""
    tokens: list[int] = []
    parents: list[int] = []
    depths: list[int] = []
    children: dict[tuple[int, int], int] = {}
    reads: list[tuple[tuple[int, int], ...]] = []
    for continuation in continuations:
        sequence = continuation.context + continuation.scored
        path = [-1]  # path[i]: the node that ends sequence[:i] (-1: the prompt's last token)
        for token in sequence[:-1]:
            key = (path[-1], token)
            if key not in children:
                children[key] = len(tokens)
                tokens.append(token)
                parents.append(path[-1])
                depths.append(len(path))
            path.append(children[key])
        start = len(continuation.context)
        reads.append(tuple((path[start + offset], token) for offset, token in enumerate(continuation.scored)))
    return ContinuationTree(tuple(tokens), tuple(parents), tuple(depths), tuple(reads))


#: Attention implementations that apply a custom 4D float mask as given (transformers'
#: ``create_causal_mask`` returns a 4D mask unchanged); FlashAttention-2 reads only padding.
TREE_MASK_ATTENTION = frozenset({"sdpa", "eager"})


def score_batch(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
) -> list[list[ContinuationScore]]:
    """For each encoded prompt, the score of each continuation: in tree rows where the attention
    takes a custom mask, else on per-row cache copies (the module docstring)."""
    if decoder.plan.attn_implementation in TREE_MASK_ATTENTION:
        return score_batch_tree(decoder, encoded, continuations)
    return score_batch_per_row(decoder, encoded, continuations)


def row_tokens_beyond_prompt(decoder: Decoder, continuations: Sequence[TokenizedContinuation]) -> int:
    """Cache tokens a row holds after its prompt (what a batch size is planned with)."""
    if decoder.plan.attn_implementation in TREE_MASK_ATTENTION:
        return len(continuation_tree(continuations).tokens)
    return 1 + max((len(c.context) + len(c.scored) for c in continuations), default=0)


def _shared_prefix(encoded: Sequence[Sequence[int]]) -> int:
    """Tokens the batch's prompts share, run once (0 when too few to pay for a separate pass)."""
    from bloomqg.generation.hf import kv_cache

    if any(len(tokens) < 1 for tokens in encoded):
        raise ValueError("every prompt needs at least one token")
    shared = kv_cache.shared_prefix_length(encoded)
    return shared if shared >= kv_cache.MIN_SHARED_PREFIX_TOKENS else 0


def score_batch_tree(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
) -> list[list[ContinuationScore]]:
    """For each encoded prompt, the score of each continuation, read from one row per prompt
    holding its own tokens and the continuations' prefix tree (the module docstring)."""
    import torch

    from bloomqg.generation.hf import kv_cache

    rows = len(encoded)
    shared = _shared_prefix(encoded)
    tree = continuation_tree(continuations)
    with torch.inference_mode():
        own_ids, own_mask = left_padded(decoder, [tokens[shared:] for tokens in encoded])
        device = own_ids.device
        own_width = own_ids.shape[1]
        width = own_width + len(tree.tokens)
        tree_ids = torch.tensor(tree.tokens, dtype=torch.long, device=device)
        input_ids = torch.cat([own_ids, tree_ids.expand(rows, -1)], dim=-1)
        last_position = shared + own_mask.sum(dim=-1, keepdim=True) - 1
        positions = torch.cat([shared + (own_mask.cumsum(dim=-1) - 1).clamp(min=0),
                               last_position + torch.tensor(tree.depths, dtype=torch.long, device=device)], dim=-1)
        allowed = _tree_attention(own_mask.bool(), tree.parents, shared)
        if shared:
            prefix_states = kv_cache.prefill_shared_prefix(decoder.model, encoded[0][:shared], shared,
                                                           cache_keyword=decoder.plan.cache_keyword)
            cache = kv_cache.seeded_cache(decoder.model.config, prefix_states, rows, shared + width)
        else:
            cache = kv_cache.decode_cache(decoder.model.config, shared + width)
        # node n sits at column own_width + n, so the prompt's last token (-1) at own_width - 1
        pairs = sorted({(own_width + node, token) for reads in tree.reads for node, token in reads})
        logprobs = _read_columns(decoder, cache, input_ids, positions, allowed, shared, pairs)
    lookup = {pair: index for index, pair in enumerate(pairs)}
    decoder.stats["prefill_tokens"] += rows * width + shared
    decoder.stats["shared_prefix_tokens_saved"] += max(rows - 1, 0) * shared
    return [[ContinuationScore(sum(row_logprobs[lookup[(own_width + node, token)]] for node, token in reads),
                               len(reads)) for reads in tree.reads]
            for row_logprobs in logprobs]


def _tree_attention(own_mask: Any, parents: Sequence[int], shared: int) -> Any:
    """Which keys each query may see, ``(rows, own + tree, shared + own + tree)`` booleans: the
    shared prefix always; an own token the row's earlier own tokens (padding never); a tree node
    the row's own tokens and its ancestors. Every query sees itself, so a padding query of a
    batch without a shared prefix is not fully masked (its output is never read)."""
    import torch

    rows, own_width = own_mask.shape
    nodes = len(parents)
    width = own_width + nodes
    lineage = torch.zeros((nodes, nodes), dtype=torch.bool)
    for node, parent in enumerate(parents):  # parents come first: a node's row is its parent's plus itself
        if parent >= 0:
            lineage[node] = lineage[parent]
        lineage[node, node] = True
    allowed = torch.zeros((rows, width, shared + width), dtype=torch.bool, device=own_mask.device)
    allowed[:, :, :shared] = True
    causal = torch.ones((own_width, own_width), dtype=torch.bool, device=own_mask.device).tril()
    allowed[:, :own_width, shared:shared + own_width] = causal[None] & own_mask[:, None, :]
    allowed[:, own_width:, shared:shared + own_width] = own_mask[:, None, :]
    allowed[:, own_width:, shared + own_width:] = lineage.to(own_mask.device)
    diagonal = torch.arange(width, device=own_mask.device)
    allowed[:, diagonal, shared + diagonal] = True
    return allowed


def _read_columns(decoder: Decoder, cache: Any, input_ids: Any, positions: Any, allowed: Any, shared: int,
                  pairs: Sequence[tuple[int, int]]) -> list[list[float]]:
    """Run the rows in column chunks on ``cache`` (holding the shared prefix) and return, per row,
    the log-probability of each (column, token) pair in ``pairs``: the token after the column."""
    import torch

    rows, width = input_ids.shape
    dtype = decoder.model.dtype
    # additive mask: finfo.min, not -inf, so no softmax sees a row of -inf only
    blocked = torch.finfo(dtype).min
    columns = max(1, decoder.prefill_chunk_tokens // rows)
    read = torch.empty((rows, len(pairs)), dtype=torch.float32, device=input_ids.device)
    for start in range(0, width, columns):
        end = min(width, start + columns)
        in_chunk = [index for index, (column, _) in enumerate(pairs) if start <= column < end]
        kept = sorted({pairs[index][0] for index in in_chunk})
        mask = torch.zeros(allowed[:, start:end, : shared + end].shape, dtype=dtype, device=input_ids.device)
        mask.masked_fill_(~allowed[:, start:end, : shared + end], blocked)
        # logits_to_keep=1 when nothing is read here: the head at one column, discarded
        keep = torch.tensor([column - start for column in kept], dtype=torch.long, device=input_ids.device)
        logits = decoder.model(input_ids=input_ids[:, start:end], attention_mask=mask[:, None],
                               position_ids=positions[:, start:end], use_cache=True,
                               logits_to_keep=keep if kept else 1,
                               **{decoder.plan.cache_keyword: cache}).logits
        if start == 0 and cache.get_seq_length() != shared + end:
            raise cache_not_filled_error(decoder.model, decoder.plan.cache_keyword, cache.get_seq_length(),
                                         shared + end)
        if not in_chunk:
            continue
        logits = logits.float()
        if not bool(torch.isfinite(logits).all()):
            raise nonfinite_logits_error(decoder.model_id, "while scoring continuations")
        slot = {column: index for index, column in enumerate(kept)}
        at = torch.tensor([slot[pairs[index][0]] for index in in_chunk], device=logits.device)
        tokens = torch.tensor([pairs[index][1] for index in in_chunk], device=logits.device)
        # log-softmax of the read tokens only: their logits less each column's logsumexp
        read[:, in_chunk] = logits[:, at, tokens] - torch.logsumexp(logits, dim=-1)[:, at]
    return read.tolist()


def score_batch_per_row(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
) -> list[list[ContinuationScore]]:
    """For each encoded prompt, the score of each continuation, on per-row cache copies (levels
    1-4 of the module docstring)."""
    import torch

    rows = len(encoded)
    shared = _shared_prefix(encoded)
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

"""Continuation scores (the ``choices`` judge mode) against a hand computation.

On tiny random-weight models, the score of every (prompt, continuation) pair computed with the
shared prefix and a row per prompt holding the continuations' prefix tree must equal scoring the
full sequence ``prompt + context + scored`` alone, in one plain forward pass, to float tolerance;
and equal the per-row cache copies (the path of attention that ignores a custom mask).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bloomqg.inputs.chat import ChatRequest, Continuation
from bloomqg.generation.hf import choices
from bloomqg.generation.hf.generator import HFTextGenerator
from bloomqg.generation.hf.model_support import ModelSupportError
from tests.support.tiny_models import available_architectures, chat_tokenizer, tiny_model

SYSTEM = " ".join(f"w{i}" for i in range(10, 30))  # a long prefix every prompt shares
CONTINUATIONS = [
    Continuation("w90 w91", "w1"),  # one scored token after a context
    Continuation("w90 w91", "w2 w3 w4"),  # several scored tokens
    Continuation("", "w5"),  # no context: scored right after the prompt
    Continuation("w92", "w6 w7"),
]


def requests() -> list[ChatRequest]:
    contents = ["w1 w2 w3", "w4 w5 w6 w7 w8 w9", "w40", "w50 w51 w52 w53 w54 w55 w56 w57"]
    return [ChatRequest(f"r{i}", ({"role": "system", "content": SYSTEM}, {"role": "user", "content": content}))
            for i, content in enumerate(contents)]


def by_hand(generator: HFTextGenerator, request: ChatRequest, continuation: Continuation) -> float:
    """log P(scored | prompt, context): the full sequence in one forward pass, no cache."""
    prompt = generator.encode(request)
    context = generator.tokenizer(continuation.context, add_special_tokens=False)["input_ids"] if continuation.context else []
    scored = generator.tokenizer(continuation.scored, add_special_tokens=False)["input_ids"]
    sequence = torch.tensor([prompt + context + scored])
    with torch.no_grad():
        logprobs = torch.log_softmax(generator.model(input_ids=sequence).logits[0].float(), dim=-1)
    start = len(prompt) + len(context)
    return sum(float(logprobs[start + i - 1, token]) for i, token in enumerate(scored))


@pytest.mark.parametrize("architecture", [a for a in available_architectures() if a != "qwen2-sliding"])
def test_shared_cache_scores_equal_each_full_sequence_scored_alone(architecture, monkeypatch):
    generator = HFTextGenerator.from_model(tiny_model(architecture), chat_tokenizer(), batch_size=3)
    # small chunks: continuation rows of one prompt fall in several chunks, the prefill in columns
    monkeypatch.setattr(choices, "ROW_TOKENS_PER_PREFILL_CHUNK", 1)
    generator.prefill_chunk_tokens = 64
    reqs = requests()
    scored = generator.score_continuations(reqs, CONTINUATIONS)
    assert [s.request_id for s in scored] == [r.request_id for r in reqs]
    assert generator.stats["scored_batches"] == 2  # batch size 3: batched across questions
    assert generator.stats["shared_prefix_tokens_saved"] > 0  # the shared prefix ran once a batch
    for request, result in zip(reqs, scored):
        assert result.n_prompt_tokens == len(generator.encode(request))
        assert [s.n_tokens for s in result.scores] == [1, 3, 1, 2]
        for continuation, score in zip(CONTINUATIONS, result.scores):
            assert score.logprob == pytest.approx(by_hand(generator, request, continuation), abs=1e-4)
            assert score.logprob < 0


def test_one_token_after_the_prompt_is_the_last_positions_log_softmax():
    """The plainest hand computation: a one-token continuation with no context."""
    generator = HFTextGenerator.from_model(tiny_model("llama", seed=3), chat_tokenizer())
    request = requests()[0]
    [result] = generator.score_continuations([request], [Continuation("", "w5"), Continuation("", "w6")])
    with torch.no_grad():
        logits = generator.model(input_ids=torch.tensor([generator.encode(request)])).logits[0, -1].float()
    vocab = generator.tokenizer.get_vocab()
    expected = torch.log_softmax(logits, dim=-1)
    assert result.scores[0].logprob == pytest.approx(float(expected[vocab["w5"]]), abs=1e-5)
    assert result.scores[1].logprob == pytest.approx(float(expected[vocab["w6"]]), abs=1e-5)
    # two of the vocabulary's options: their probabilities are below one together
    assert math.exp(result.scores[0].logprob) + math.exp(result.scores[1].logprob) < 1


def test_scored_tokens_follow_the_joint_tokenisation():
    tokenizer = chat_tokenizer()
    tokenized = choices.tokenize_continuation(tokenizer, Continuation("w1 w2", " w3 w4"))
    vocab = tokenizer.get_vocab()
    assert tokenized.context == (vocab["w1"], vocab["w2"])
    assert tokenized.scored == (vocab["w3"], vocab["w4"])
    with pytest.raises(ValueError, match="no token"):
        choices.tokenize_continuation(tokenizer, Continuation("w1", ""))


def test_a_sliding_window_model_cannot_score_continuations():
    if "qwen2-sliding" not in available_architectures():
        pytest.skip("this transformers has no Qwen2")
    generator = HFTextGenerator.from_model(tiny_model("qwen2-sliding"), chat_tokenizer())
    assert generator.supports_choice_scoring is False
    with pytest.raises(ModelSupportError, match="full attention"):
        generator.score_continuations(requests()[:1], CONTINUATIONS)


def seam_tokenizer():
    """The character tokenizer plus three BPE merges, one across the seam of a context ending in a
    quote and an option opening with ``A`` (``"A``): the joint text does not start with the
    context's tokens, so the option is encoded apart (lm-evaluation-harness's rule)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    from tests.support.tiny_models import CHARS, CHATML_TEMPLATE, SPECIAL_TOKENS

    merged = ['"A', "pp", "ly"]
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + CHARS + merged)}
    backend = Tokenizer(models.BPE(vocab, [('"', "A"), ("p", "p"), ("l", "y")], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                        eos_token="<|im_end|>", additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


#: Options of one to nine tokens, two sharing a context and a first token, one without a context,
#: one merged across the seam (``"`` + ``Apply``).
SEAM_CONTINUATIONS = [
    Continuation('{"unique": ', "true"),
    Continuation('{"unique": ', "false"),
    Continuation('{"bloom_level": "', 'Apply"'),
    Continuation('{"bloom_level": "', 'Analyze"'),
    Continuation('{"bloom_level": "', 'Understand"'),
    Continuation("", "{"),
    Continuation('{"units": ["', 'Stacks"'),
]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_tree_rows_score_as_the_per_row_cache_copies(attention):
    """The tree path (one row per prompt, a 4D mask) against the per-row copies it replaced, on
    prompts of different lengths sharing a prefix, in column chunks that split the tree."""
    tokenizer = seam_tokenizer()
    model = tiny_model("llama", seed=5, vocab_size=len(tokenizer.get_vocab()))
    model.set_attn_implementation(attention)
    generator = HFTextGenerator.from_model(model, tokenizer)
    assert generator.plan.attn_implementation == attention
    generator.prefill_chunk_tokens = 3 * 40  # three rows of 40 columns: the tree spans chunks
    tokenized = [choices.tokenize_continuation(tokenizer, c) for c in SEAM_CONTINUATIONS]
    apply = tokenized[2]
    assert apply.scored == tuple(tokenizer.convert_tokens_to_ids(["A", "pp", "ly", '"']))  # encoded apart
    assert apply.context[-1] == tokenizer.convert_tokens_to_ids('"')
    system = {"role": "system", "content": "Judge the question below as the rubric says."}
    questions = ["Why?", "Explain how a stack reverses a word.", "What makes a queue fair?"]
    encoded = [generator.encode(ChatRequest(f"q{i}", (system, {"role": "user", "content": q})))
               for i, q in enumerate(questions)]
    assert len({len(tokens) for tokens in encoded}) == 3
    tree = choices.continuation_tree(tokenized)
    assert len(tree.tokens) < sum(len(c.context) + len(c.scored) - 1 for c in tokenized)  # shared nodes
    for batch in (encoded, encoded[1:2], [encoded[2], encoded[0][-5:]]):  # shared prefix, one prompt, none
        expected = choices.score_batch_per_row(generator, batch, tokenized)
        got = choices.score_batch_tree(generator, batch, tokenized)
        for got_row, expected_row in zip(got, expected, strict=True):
            assert [s.n_tokens for s in got_row] == [s.n_tokens for s in expected_row] == [4, 5, 4, 7, 11, 1, 7]
            for got_score, expected_score in zip(got_row, expected_row):
                assert got_score.logprob == pytest.approx(expected_score.logprob, abs=1e-4)


def test_the_tree_holds_each_shared_prefix_once_and_reads_each_scored_token():
    a, b, c = 11, 12, 13
    tokenized = [choices.TokenizedContinuation((a, b), (c,)), choices.TokenizedContinuation((a, b), (c, a, b)),
                 choices.TokenizedContinuation((), (b, c))]
    tree = choices.continuation_tree(tokenized)
    # a, b (the shared context), c and a (the long option but its last token), none for (b, c) but b
    assert tree.tokens == (a, b, c, a, b)
    assert tree.parents == (-1, 0, 1, 2, -1)
    assert tree.depths == (1, 2, 3, 4, 1)
    assert tree.reads == (((1, c),), ((1, c), (2, a), (3, b)), ((-1, b), (4, c)))

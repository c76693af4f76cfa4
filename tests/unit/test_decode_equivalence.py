"""Our decode loop against ``model.generate``: tiny random models of every native architecture.

Greedy decoding in fp32 must give token-identical answers (texts and lengths) whatever the
loop does to save work: batches of several prompts, the shared prefix computed once (on and
off), prefill in small column chunks, response prefill, and rows that stop early and leave the
batch.  ``tests/integration/test_transformers_range.py`` runs this file again on the lowest
supported transformers.  bf16 differs for numerical reasons, so there the logits are compared
with a tolerance.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.generator import HFTextGenerator
from bloomqg.generation.hf.model_support import ModelSupportError
from tests.support.tiny_models import available_architectures, chat_tokenizer, generate_reference, tiny_model

MAX_NEW = 12
SYSTEM = " ".join(f"w{i}" for i in range(10, 30))  # shared by every prompt: a long common prefix


def requests(prefill: bool = False) -> list[ChatRequest]:
    contents = ["w1 w2 w3", "w4 w5 w6 w7 w8 w9", "w40 w41", "w50 w51 w52 w53", "w60", "w70 w71 w72"]
    out = []
    for index, content in enumerate(contents):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}]
        if prefill and index % 2 == 0:
            messages.append({"role": "assistant", "content": "w99 w98"})
        out.append(ChatRequest(f"r{index}", tuple(messages)))
    return out


def reference(generator: HFTextGenerator, reqs: list[ChatRequest], max_new: int = MAX_NEW) -> list[list[int]]:
    return generate_reference(generator, reqs, max_new)


def reference_texts(generator, reqs, continuations):
    texts = []
    for request, kept in zip(reqs, continuations):
        prefix = request.messages[-1]["content"] if request.messages[-1]["role"] == "assistant" else ""
        continuation = generator.tokenizer.decode(kept, skip_special_tokens=True)
        texts.append((prefix + continuation).rstrip() if prefix else continuation.strip())
    return texts


def early_stop_token(generator, reqs) -> int:
    """A token some rows emit within the limit and others never do, so rows stop at different steps."""
    free = reference(generator, reqs)
    counts: dict[int, list[int]] = {}
    for row, tokens in enumerate(free):
        for step, token in enumerate(tokens[: MAX_NEW - 1]):
            counts.setdefault(token, [])
            if row not in counts[token]:
                counts[token].append(row)
    candidates = [token for token, rows in counts.items() if 0 < len(rows) < len(reqs)]
    assert candidates, "the random model emits the same tokens in every row; pick another seed"
    return min(candidates)


def generator_for(architecture: str, *, share: bool, chunk: int | None, seed: int = 0) -> HFTextGenerator:
    model = tiny_model(architecture, seed=seed)
    generator = HFTextGenerator.from_model(model, chat_tokenizer(), model_id=architecture, batch_size=4,
                                           share_prompt_prefix=share)
    if chunk is not None:
        generator.prefill_chunk_tokens = chunk
    return generator


ARCHS = available_architectures()


@functools.cache
def expected(architecture: str, prefill: bool) -> tuple[int, tuple[tuple[int, ...], ...]]:
    """The early-stop token and ``model.generate``'s continuations for one model and prompt set.

    They depend on neither the prefix sharing nor the prefill chunk, so the four loop settings
    of an architecture compare against two references computed once each (the file runs in one
    worker), not eight."""
    generator = generator_for(architecture, share=False, chunk=None)
    reqs = requests(prefill)
    stop = early_stop_token(generator, reqs)
    generator.stop_ids = generator.stop_ids | {stop}
    return stop, tuple(tuple(tokens) for tokens in reference(generator, reqs))


@pytest.mark.parametrize("architecture", ARCHS)
@pytest.mark.parametrize(("share", "chunk", "prefill"), [
    (True, None, False), (False, None, False), (True, 8, True), (False, 8, True)])
def test_greedy_texts_equal_generate(architecture, share, chunk, prefill):
    generator = generator_for(architecture, share=share, chunk=chunk)
    reqs = requests(prefill)
    stop, cached = expected(architecture, prefill)
    want = [list(tokens) for tokens in cached]
    generator.stop_ids = generator.stop_ids | {stop}
    got = generator.complete(reqs, DecodingParams(do_sample=False, max_new_tokens=MAX_NEW))
    assert [c.text for c in got] == reference_texts(generator, reqs, want)
    assert [c.n_completion_tokens for c in got] == [len(w) for w in want]
    finishes = {c.finish_reason for c in got}
    assert finishes == {"stop", "length"}, finishes  # some rows left the batch early
    if share and generator.share_prompt_prefix:
        assert generator.stats["shared_prefix_tokens_saved"] > 0
    # Qwen2 with sliding-window layers cannot seed them with a shared prefix: it turns itself off
    assert generator.share_prompt_prefix == (share and architecture != "qwen2-sliding")


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_lazy_compaction_on_a_gpu_schedule_gives_the_same_texts(architecture):
    """Dead rows kept until a quarter of the batch is dead (the GPU policy) change no token."""
    generator = generator_for(architecture, share=True, chunk=None)
    generator.batch_size_policy = 6  # one batch: rows stop at several steps
    reqs = requests()
    generator.stop_ids = generator.stop_ids | {early_stop_token(generator, reqs)}
    params = DecodingParams(do_sample=False, max_new_tokens=MAX_NEW)
    eager = [c.text for c in generator.complete(reqs, params)]
    eager_stats = dict(generator.stats)
    generator.compact_fraction = 0.5
    lazy = [c.text for c in generator.complete(reqs, params)]
    assert lazy == eager == reference_texts(generator, reqs, reference(generator, reqs))
    lazy_compactions = generator.stats["cache_compactions"] - eager_stats["cache_compactions"]
    lazy_steps = generator.stats["computed_decode_steps"] - eager_stats["computed_decode_steps"]
    assert lazy_compactions <= eager_stats["cache_compactions"]
    assert lazy_steps > eager_stats["computed_decode_steps"]  # dead rows were kept for a while


def test_sampled_text_does_not_depend_on_the_batch():
    generator = generator_for("llama", share=True, chunk=None)
    reqs = requests()
    params = DecodingParams(do_sample=True, temperature=0.9, top_p=0.95, max_new_tokens=MAX_NEW, seed=3)
    batched = [c.text for c in generator.complete(reqs, params)]
    alone = [generator.complete([r], params)[0].text for r in reqs]
    assert batched == alone


def test_bf16_logits_close_to_fp32():
    """bf16 cannot be token-identical; its first-step logits through our cache stay close."""
    fp32 = generator_for("llama", share=True, chunk=None)
    bf16 = HFTextGenerator.from_model(tiny_model("llama", dtype=torch.bfloat16), chat_tokenizer(), batch_size=4)
    reqs = requests()
    captured = {}
    for name, generator in (("fp32", fp32), ("bf16", bf16)):
        original = generator.forward

        def spy(cache, _original=original, _name=name, **inputs):
            logits = _original(cache, **inputs)
            captured.setdefault(_name, logits)
            return logits
        generator.forward = spy
        generator.complete(reqs, DecodingParams(do_sample=False, max_new_tokens=2))
    scale = captured["fp32"].abs().max()
    error = (captured["bf16"] - captured["fp32"]).abs().max()
    # bf16 keeps 8 bits of mantissa; over two random layers the error reaches a few per cent
    assert error <= 0.1 * scale, (float(error), float(scale))
    # a broken bf16 path (wrong cache rows, positions) would scramble the ranking, not nudge it
    agree = (captured["bf16"].argmax(-1) == captured["fp32"].argmax(-1)).float().mean()
    assert agree >= 0.75, float(agree)


def test_a_model_that_ignores_the_cache_fails_loudly():
    """A forward that drops the cache keyword (remote code swallowing **kwargs) is caught."""
    generator = generator_for("llama", share=False, chunk=None)
    generator.plan = type(generator.plan)(**{**generator.plan.__dict__, "cache_keyword": "unused_cache"})
    original_forward = generator.model.forward

    def swallowing(*args, unused_cache=None, **kwargs):
        return original_forward(*args, **kwargs)
    generator.model.forward = swallowing
    with pytest.raises(ModelSupportError, match="did not fill the KV cache passed as unused_cache="):
        generator.complete(requests(), DecodingParams(do_sample=False, max_new_tokens=2))

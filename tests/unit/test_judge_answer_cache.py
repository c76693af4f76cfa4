"""An hf judge's answers are cached like API answers: a forced rerun generates nothing.

A real (tiny, random-weight) transformers model is saved to disk and loaded the way a
judge_questions job loads it, through the hf backend's text-generator factory.
"""

from __future__ import annotations

import pandas as pd
import pytest

from bloomqg.api.cache import CallCache
from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.judges.stage import judge_questions
from tests.support.tiny_models import save_standin
from tests.unit.test_judges_stage import dataset_frame, generations_frame
from tests.support.specs import judge_spec, model_spec

pytest.importorskip("transformers")

#: A short rubric: the tiny model's context is 512 tokens.
RUBRIC = """<!-- role: system -->
Judge a ${domain} question.
<!-- role: user -->
<original_question>${original_question}</original_question> <question>${question}</question> ${knowledge_units}
"""
JUDGE = {"backend": "hf", "model_ref": "tiny", "mode": "generate", "generation": {"max_new_tokens": 6, "do_sample": False, "temperature": 0}}


def run_judge(model_dir, cache_dir, rubric):
    """One judge_questions job: build the generator as the script does, judge, close."""
    judge = judge_spec("tiny-judge", JUDGE, seed=7)
    generator = make_judge_text_generator(
        judge, model=model_spec("tiny", {"backend": "hf", "model": str(model_dir)}), model_dir=None,
        cache_dir=cache_dir, num_threads=1,
    )
    try:
        frame = judge_questions(
            generations_frame(["Explain how a stack reverses a word.", "Why is a queue fair?", None]),
            judge, dataset=dataset_frame(), domain="cs", prompt_path=rubric, text_generator=generator,
        )
    finally:
        generator.close()
    return frame, generator


def test_a_rerun_of_an_hf_judge_reads_every_answer_from_the_call_cache(tmp_path):
    model_dir = save_standin("llama", tmp_path / "model")
    rubric = tmp_path / "rubric.md"
    rubric.write_text(RUBRIC)
    cache_dir = tmp_path / "cache"

    first, first_generator = run_judge(model_dir, cache_dir, rubric)
    assert first_generator.inner.stats["batches"] >= 1  # the model was asked
    assert len(CallCache(cache_dir)) == 2  # one answer per judged question (the third has none)

    second, second_generator = run_judge(model_dir, cache_dir, rubric)
    assert second_generator.inner.stats["batches"] == 0  # nothing generated
    judged = second["status"] != "no_question"
    assert second.loc[judged, "cached"].eq(True).all() and first.loc[judged, "cached"].eq(False).all()
    same = ["prompt_id", "criterion", "status", "reason", "raw_text", "value_bool", "value_level",
            "n_prompt_tokens", "n_completion_tokens"]
    pd.testing.assert_frame_equal(first[same], second[same])

    # other decoding settings are other entries (do_sample is no API field, so it joins the identity)
    request = ChatRequest("r", ({"role": "user", "content": "w1 w2"},))
    greedy = DecodingParams(do_sample=False, max_new_tokens=4)
    assert second_generator.key(request, greedy) != second_generator.key(request, DecodingParams(max_new_tokens=4))
    assert second_generator.key(request, greedy) != second_generator.key(
        request, DecodingParams(do_sample=False, max_new_tokens=5))


def test_an_hf_judge_runs_the_borrowed_weights_in_its_own_dtype_and_caches_apart(tmp_path):
    """The judge's ``dtype`` overrides its models entry's in-process, is recorded, and keys the
    cache: a float32 judge's answers are not read back by a bf16 one."""
    import torch

    model_dir = save_standin("llama", tmp_path / "model")
    entry = {"backend": "hf", "model": str(model_dir), "dtype": "float32"}
    made = {}
    for dtype in (None, "bfloat16"):
        spec = {**JUDGE, **({"dtype": dtype} if dtype else {})}
        generator = make_judge_text_generator(judge_spec("tiny-judge", spec), model=model_spec("tiny", entry),
                                              model_dir=None, cache_dir=tmp_path / "cache", num_threads=1)
        try:
            made[dtype] = (generator.inner.model.dtype, generator.inner.provenance["dtype"],
                           generator.key(ChatRequest("r", ({"role": "user", "content": "w"},)),
                                         DecodingParams(do_sample=False, max_new_tokens=4)))
        finally:
            generator.close()
    assert made[None][:2] == (torch.float32, "float32")
    assert made["bfloat16"][:2] == (torch.bfloat16, "bfloat16")
    assert made[None][2] != made["bfloat16"][2]


@pytest.mark.parametrize("avx512_bf16, amx, expected", [(True, False, "bfloat16"), (False, True, "bfloat16"),
                                                         (False, False, "float32")])
def test_auto_on_a_cpu_is_bf16_only_where_the_cpu_computes_it(monkeypatch, avx512_bf16, amx, expected):
    import torch

    from bloomqg.generation.hf.loading import resolve_dtype

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert resolve_dtype("auto", on_gpu=False) == getattr(torch, expected)
    assert resolve_dtype("float32", on_gpu=False) == torch.float32

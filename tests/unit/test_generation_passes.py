"""The generation stage runs a strategy's passes as definitions: each later pass gets the previous
pass's question, every pass is recorded, a crash in a later pass resumes without asking the
earlier pass again, and each pass's calls have their own cache keys.  A scripted generator
stands in for a model (the model itself: tests/integration/test_refine.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bloomqg.inputs.chat import Completion, DecodingParams
from bloomqg.generation.cached import CachedTextGenerator
from bloomqg.generation.stage import generate_questions
from bloomqg.inputs.prompts import build_prompts

PARAMS = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=16, do_sample=False, seed=1)
UNITS = ["Stack", "Queue"]


def dataset() -> pd.DataFrame:
    rows = [("Stack", "Define a stack.", "Remember"), ("Queue", "What is FIFO?", "Remember"),
            ("Stack", "Design a min-stack.", "Create")]
    return pd.DataFrame({"item_id": [f"cs-{i:04d}" for i in range(1, 4)], "dataset": "cs",
                         "source_row": range(1, 4), "question": [q for _, q, _ in rows],
                         "bloom_level": [lv for _, _, lv in rows], "bloom_source": "label",
                         "knowledge_units": [[u] for u, _, _ in rows]})


class Scripted:
    """Answers a draft for a first-pass prompt and 'Better: <draft>' for a revise prompt;
    ``crash_after`` calls it raises, as a killed job would stop."""

    provenance: dict = {"model": "scripted"}

    def __init__(self, crash_after: int | None = None, fail: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.crash_after, self.fail = crash_after, fail

    def complete(self, requests, params, on_batch=None):
        out = []
        for request in requests:
            if self.crash_after is not None and len(self.calls) >= self.crash_after:
                raise RuntimeError("killed")
            text = request.messages[-1]["content"]
            self.calls.append((request.request_id, text))
            if "Draft question:" in text:
                draft = text.split("Draft question:", 1)[1].strip()
                answer = json.dumps({"question": f"Better: {draft}"})
            elif self.fail and request.request_id.startswith(self.fail):
                answer = "no idea"
            else:
                answer = json.dumps({"question": f"Why does {request.request_id} matter?"})
            completion = Completion(request.request_id, answer, "stop", n_prompt_tokens=10,
                                    n_completion_tokens=5, latency_s=0.5)
            out.append(completion)
            if on_batch is not None:
                on_batch([completion])
        return out

    def close(self) -> None:
        pass


def refine_prompts() -> pd.DataFrame:
    return build_prompts(dataset(), "refine", k_exemplars=1, seed=3, domain="computer science")


def test_each_pass_is_recorded_and_the_last_one_is_the_rows(tmp_path):
    generator = Scripted(fail="cs-0002")
    frame = generate_questions(refine_prompts(), "m", generator, PARAMS, knowledge_units=UNITS,
                               out_path=tmp_path / "g.parquet", checkpoint_path=tmp_path / "ckpt")
    row = frame.set_index("item_id").loc["cs-0001"]
    passes = json.loads(row["passes_json"])
    assert [p["pass"] for p in passes] == ["generate", "revise"]
    assert row["new_question"] == "Better: Why does cs-0001:refine matter?" == passes[1]["new_question"]
    assert passes[0]["new_question"] == "Why does cs-0001:refine matter?"
    assert (row["n_prompt_tokens"], row["n_completion_tokens"], row["latency_s"]) == (20, 10, 1.0)
    # the revise prompt carries the draft and the target
    revise = [text for pid, text in generator.calls if pid == "cs-0001:refine" and "Draft question:" in text]
    assert len(revise) == 1 and "Draft question: Why does cs-0001:refine matter?" in revise[0]
    assert "Target Bloom level: Remember" in revise[0]
    # a draft that is no question ends the row at that pass, naming it; no second call
    failed = frame.set_index("item_id").loc["cs-0002"]
    assert failed["parse_status"] == "failed" and failed["parse_error"].startswith("pass generate:")
    assert len(json.loads(failed["passes_json"])) == 1
    assert sum(pid == "cs-0002:refine" for pid, _ in generator.calls) == 1


def test_a_crash_in_the_second_pass_resumes_without_asking_the_first_again(tmp_path):
    out, checkpoint = tmp_path / "g.parquet", tmp_path / "ckpt"
    with pytest.raises(RuntimeError, match="killed"):
        generate_questions(refine_prompts(), "m", Scripted(crash_after=4), PARAMS, knowledge_units=UNITS,
                           out_path=out, checkpoint_path=checkpoint)
    assert checkpoint.exists() and not out.exists()
    resumed = Scripted()
    frame = generate_questions(refine_prompts(), "m", resumed, PARAMS, knowledge_units=UNITS,
                               out_path=out, checkpoint_path=checkpoint)
    assert all("Draft question:" in text for _, text in resumed.calls)  # first passes were kept
    assert len(resumed.calls) == 2  # 3 drafts and 1 revision were done before the crash
    assert frame["new_question"].str.startswith("Better: ").all()
    uninterrupted = generate_questions(refine_prompts(), "m", Scripted(), PARAMS, knowledge_units=UNITS,
                                       out_path=tmp_path / "u.parquet", checkpoint_path=tmp_path / "u")
    assert frame["passes_json"].tolist() == uninterrupted["passes_json"].tolist()


def test_each_pass_has_its_own_cache_key(tmp_path):
    cached = CachedTextGenerator(Scripted(), cache_dir=tmp_path / "cache", identity={"model": "scripted"})
    prompts = refine_prompts()
    generate_questions(prompts, "m", cached, PARAMS, knowledge_units=UNITS,
                       out_path=tmp_path / "g.parquet", checkpoint_path=tmp_path / "ckpt")
    keys = {pid: set() for pid in prompts["prompt_id"]}
    for pid, text in cached.inner.calls:
        keys[pid].add(text)
    assert all(len(texts) == 2 for texts in keys.values())  # two distinct requests per prompt
    again = Scripted()
    rerun = CachedTextGenerator(again, cache_dir=tmp_path / "cache", identity={"model": "scripted"})
    frame = generate_questions(prompts, "m", rerun, PARAMS, knowledge_units=UNITS,
                               out_path=tmp_path / "g2.parquet", checkpoint_path=tmp_path / "ckpt2")
    assert again.calls == [] and frame["cached"].all()  # both passes answered from the cache


def test_the_cost_estimate_counts_every_pass(tmp_path):
    from bloomqg.study.study_cost import generation_requests

    prompts = refine_prompts()
    before = generation_requests(prompts, None)
    assert [len(requests) for requests in before] == [3, 3]  # both passes of every prompt
    assert all("Draft question: " + " ".join(prompts["original_question"].iloc[i].split()) in r.messages[-1]["content"]
               for i, r in enumerate(before[1]))  # before generation the original stands in for the draft
    generated = generate_questions(prompts, "m", Scripted(fail="cs-0002"), PARAMS, knowledge_units=UNITS,
                                   out_path=tmp_path / "g.parquet", checkpoint_path=tmp_path / "ckpt")
    after = generation_requests(prompts, generated)
    assert [len(requests) for requests in after] == [3, 2]  # cs-0002's draft failed: no second call
    assert "Draft question: Why does cs-0001:refine matter?" in after[1][0].messages[-1]["content"]
    one_pass = generation_requests(build_prompts(dataset(), "fgp", k_exemplars=1, seed=3, domain="cs"), None)
    assert [len(requests) for requests in one_pass] == [3]


def test_units_asked_but_not_named_are_an_empty_set_and_not_asked_are_null(tmp_path):
    """CoT asks for the original's units: a reply that names none records an empty set, so the
    cell scores Knowledge-ID 0% like one where the model sometimes names a unit; FGP does not
    ask, and its rows stay null (the metric does not apply)."""
    generator = Scripted()  # answers a question and nothing else
    frames = {strategy: generate_questions(
        build_prompts(dataset(), strategy, k_exemplars=1, seed=3, domain="computer science"), "m", generator,
        PARAMS, knowledge_units=UNITS, out_path=tmp_path / f"{strategy}.parquet",
        checkpoint_path=tmp_path / f"{strategy}.ckpt") for strategy in ("cot", "fgp")}
    assert [list(units) for units in frames["cot"]["identified_knowledge_units"]] == [[], [], []]
    assert frames["fgp"]["identified_knowledge_units"].isna().all()

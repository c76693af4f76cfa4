"""bloomqg inside Inspect, offline (docs/inspect.md, "three ways in"): the panel scorer on a log
of a plain Inspect task that is not bloomqg's, the ``bloomqg/questions`` task under Inspect's
``mockllm`` provider, and that task's log imported one cell of two.

The repository's config (its ``cs`` dataset, its ``rules`` and ``minilm`` judges) is the study.
``mockllm`` answers with outputs that carry their token usage: without it the provider counts
tokens with a tiktoken vocabulary it would download. The registered names resolve through the
``inspect_ai`` entry point pyproject.toml declares (tests/support/inspect_entry_point.py).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (pip install -e '.[inspect]')")

from tests.conftest import REPO  # noqa: E402
from tests.support.inspect_entry_point import declared_entry_points, inspect_env  # noqa: E402

pytestmark = pytest.mark.integration

CONFIG = str(REPO / "config.yaml")
INSPECT = str(Path(sys.executable).parent / "inspect")
PLAIN_ANSWERS = {
    "bst": "Compare the height of a binary search tree built from sorted keys with one built from random keys.",
    "heap": "",  # the model wrote nothing: no question, and not counted as generated
}


def _usage(output):
    from inspect_ai.model import ModelUsage

    output.usage = ModelUsage(input_tokens=20, output_tokens=12, total_tokens=32)
    return output


def _plain_task_log(log_dir: Path) -> Path:
    """A task of the user's own: plain-text questions, the target the Bloom level, the units in
    the metadata; written by ``inspect_ai.eval`` with mockllm."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, get_model
    from inspect_ai.solver import generate

    def answer(messages, tools, tool_choice, config):
        key = "bst" if "binary search tree" in messages[-1].text else "heap"
        return _usage(ModelOutput.from_content("mockllm/model", PLAIN_ANSWERS[key]))

    task = Task(name="rewrite_questions", solver=generate(), dataset=[
        Sample(id="bst", input="Write a harder question than: Define the binary search tree property.",
               target="Analyze", metadata={"knowledge_units": ["Binary Search Tree"]}),
        Sample(id="heap", input="Write a question about heaps.", target="Apply", metadata={"knowledge_units": "Heap"}),
    ])
    (log,) = eval(task, model=get_model("mockllm/model", custom_outputs=answer, memoize=False), log_dir=str(log_dir),
                  display="none", max_connections=1)
    assert log.status == "success", log.error
    return Path(log.location)


def test_the_entry_point_is_declared_and_registers_the_scorer_and_the_task():
    assert declared_entry_points() == {"bloomqg": "bloomqg.inspect_eval.registry"}
    from inspect_ai._util.registry import registry_lookup

    import bloomqg.inspect_eval.registry  # noqa: F401  (what the entry point loads)

    assert registry_lookup("scorer", "bloomqg/bloomqg_panel") is not None
    assert registry_lookup("task", "bloomqg/questions") is not None


def test_inspect_score_adds_the_panels_scores_to_a_plain_tasks_log(tmp_path):
    from inspect_ai.log import read_eval_log

    log = _plain_task_log(tmp_path / "logs")
    scored = tmp_path / "scored.eval"
    command = [INSPECT, "score", str(log), "--scorer", "bloomqg/bloomqg_panel", "-S", f"config={CONFIG}",
               "-S", "dataset=cs", "-S", "answer=text", "--output-file", str(scored), "--display", "none"]
    result = subprocess.run(command, cwd=tmp_path, env=inspect_env(tmp_path / "entry-points"), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    samples = {sample.id: sample for sample in read_eval_log(str(scored)).samples}
    bst = samples["bst"].scores["bloomqg_panel"]
    assert bst.metadata["panel"] == ["rules", "minilm"]
    assert bst.metadata["question"] == PLAIN_ANSWERS["bst"]
    assert bst.metadata["target_bloom_level"] == "Analyze" and bst.metadata["original_knowledge_units"] == ["Binary Search Tree"]
    # one value per criterion, each explained with every judge's vote; the answer the voted level
    assert set(bst.value) == {"usability", "unique", "readable", "answerable", "bloom_level", "knowledge_units",
                              "catcons", "knowcov"}
    for criterion in ("unique", "readable", "answerable", "bloom_level", "knowledge_units"):
        line = next(line for line in bst.explanation.splitlines() if line.startswith(f"{criterion}:"))
        assert "rules " in line and "minilm " in line, line
        assert set(bst.metadata["criteria"][criterion]["verdicts"]) == {"rules", "minilm"}
    assert bst.answer.endswith(("useful: yes", "useful: no", "useful: not rated"))
    assert bst.value["unique"] is True  # both judges: far from the original
    heap = samples["heap"].scores["bloomqg_panel"]
    assert heap.explanation == "no question to judge: empty answer" and heap.answer == "no question · useful: not rated"
    assert all(math.isnan(heap.value[key]) for key in ("usability", "unique", "catcons"))  # missing, not an error
    results = {score.name: score for score in read_eval_log(str(scored), header_only=True).results.scores}
    assert list(results)[0] == "usability"
    unique = results["unique"]
    assert unique.metrics["bloomqg/share"].value == 1.0 and unique.metrics["bloomqg/rated"].value == 1.0
    assert unique.metrics["bloomqg/ci_low"].value == pytest.approx(0.025, abs=1e-9)  # Clopper–Pearson, 1 of 1
    assert unique.metrics["bloomqg/ci_high"].value == 1.0


def _question_for(messages, tools, tool_choice, config):
    """mockllm as a question writer: one JSON answer per prompt, naming the prompt's item."""
    from inspect_ai.model import ModelOutput

    prompt = messages[-1].text
    topic = "binary search trees" if "binary search tree" in prompt.lower() else "data structures"
    text = json.dumps({"question": f"How would you compare two designs of {topic} for a cache ({len(prompt)})?"})
    return _usage(ModelOutput.from_content("mockllm/model", text))


def test_the_questions_tasks_log_imports_into_the_study_one_cell_of_two(tmp_path):
    """``bloomqg/questions`` for cs/fgp: its samples are the study's own prompts (matched by
    prompt_id, no input differs), scored by the panel; the FGP cell imports, the CoT cell of the
    same dataset is told that no sample answers it."""
    from inspect_ai import eval

    from bloomqg.generation.inspect_source import InspectImportError, import_generations
    from bloomqg.inputs.datasets import dataset_knowledge_units
    from bloomqg.inspect_eval.questions import task_prompts
    from bloomqg.inspect_eval.study_inputs import dataset_frame
    from inspect_ai.model import get_model

    import bloomqg.inspect_eval.registry  # noqa: F401  (what the entry point loads)

    (log,) = eval("bloomqg/questions", task_args={"dataset": "cs", "strategy": "fgp", "config": CONFIG},
                  model=get_model("mockllm/model", custom_outputs=_question_for, memoize=False),
                  log_dir=str(tmp_path / "runs"), display="none", max_connections=4)
    assert log.status == "success", log.error
    assert log.eval.task == "bloomqg/questions" and log.eval.task_args["strategy"] == "fgp"
    first = log.samples[0].scores["bloomqg_panel"]
    assert first.answer and first.metadata["panel"] == ["rules", "minilm"]
    assert log.results.scores[0].name == "usability"

    fgp = task_prompts(CONFIG, "cs", "fgp")
    units = dataset_knowledge_units(dataset_frame(CONFIG, "cs"))
    frame, (source,) = import_generations(tmp_path / "runs", fgp, "mock-inspect", knowledge_units=units, seed=0)
    assert list(frame["prompt_id"]) == list(fgp["prompt_id"]) and (frame["parse_status"] == "ok").all()
    assert dict(source.matched_by) == {"metadata.prompt_id": len(fgp)} and not source.input_mismatches
    assert list(frame["prompt_hash"].unique()) == list(fgp["prompt_hash"].unique())
    with pytest.raises(InspectImportError, match=r"answers \d+ prompt\(s\) of cs/cot"):
        import_generations(tmp_path / "runs", task_prompts(CONFIG, "cs", "cot"), "mock-inspect",
                           knowledge_units=units, seed=0)

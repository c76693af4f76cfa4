"""Backend ``rules``: the verb list and transparent heuristics (:mod:`bloomqg.judges.rules`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bloomqg.judges.registry import JudgeBackend, JudgeContext
from bloomqg.inputs.resources import JobResources

if TYPE_CHECKING:
    from bloomqg.judges.rules import RulesJudge


def _build(context: JudgeContext) -> "RulesJudge":
    from bloomqg.judges.rules import RulesJudge

    dataset = context.dataset
    items = list(zip(dataset["item_id"], dataset["question"], dataset["knowledge_units"]))
    return RulesJudge.from_spec(context.judge_name, context.spec, items, context.knowledge_units)


BACKEND = JudgeBackend(
    name="rules",
    description="verb list and heuristics",
    build=_build,
    resources=lambda name, spec, models: JobResources(gpu=0, mem_mb=2000, runtime=30, api=0),
    properties={
        "verb_list": {"type": "string", "description": "Bloom verb list CSV (default: data/bloom_verbs.csv)."},
        "max_token_jaccard": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.7,
                              "description": "Content-word Jaccard to the original at which a question is not unique."},
        "max_char_ratio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.85,
                           "description": "Character ratio (difflib) to the original at which a question is not unique."},
        "min_words": {"type": "integer", "minimum": 0, "maximum": 100000, "default": 4, "description": "Fewest words of a readable question."},
        "max_words": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 80, "description": "Most words of a readable question."},
        "min_alnum_share": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.6,
                            "description": "Least share of letters and digits among non-space characters of a readable question."},
        "unit_aliases": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                         "description": "{knowledge unit: [alias, ...]} also matched as the unit's name."},
    },
)

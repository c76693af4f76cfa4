"""The ``rules`` judge: transparent heuristics for every criterion of the rubric.

No model, no randomness: each answer comes with a reason naming the rule that produced it, so a
reader can audit it. The heuristics, and their default thresholds (all overridable in the
judge's config entry, see :mod:`bloomqg.judges.backends.rules`):

- **unique** — lexical similarity to the original question: the Jaccard similarity of the two
  sets of (lightly stemmed, stop-word-free) content words, and difflib's character ratio of the
  normalised texts. A question is *not* unique when either reaches its threshold
  (``max_token_jaccard`` 0.7, ``max_char_ratio`` 0.85): reordering keeps the word set (high
  Jaccard), light rewording keeps most characters (high ratio). The paper's example, "What is a
  binary search tree?" vs "Explain the concept of a binary search tree and provide an example",
  scores 0.43 / 0.55 and is unique. Synonym rewrites escape both measures; that is this judge's
  known blind spot, covered by the embedding and LLM judges.
- **bloom_level** — the paper's verb rule (:class:`bloomqg.inputs.verbs.VerbAnnotator`: the highest
  level any of whose verbs occurs as a word). When no verb occurs, a question-word heuristic
  (:data:`QUESTION_WORD_LEVELS`, then :data:`CJK_QUESTION_WORD_LEVELS` for Chinese; first match
  wins, e.g. "what is" / "define" -> Remember, "why" / "how does" -> Understand, "how many" /
  "多少" -> Apply) answers, and the reason says so. When neither finds
  anything the judge does not guess: the criterion gets status ``error``.
- **readable** — all of: ``min_words``..``max_words`` words (4..80; a CJK character counts as
  half a word); ends as a question or a sentence ("?" or "." — so imperatives such as "Explain
  … ." pass — optionally followed by a short parenthesised note, or with a fill-in blank, or
  with multiple-choice options; a generation cut off mid-sentence does not); balanced brackets
  (option labels "A)" aside); no JSON/markup debris; no word or 3-word phrase repeated three
  times in a row; at least ``min_alnum_share`` (0.6) of non-space characters (fill-in blanks
  "_____" aside) are letters or digits. The reason lists every failed check.
- **answerable** — all of: at least two content words; no placeholder (``[insert…]``, ``<topic>``,
  ``XXX``, ``{unit}``); no reference to material that is not there ("the above code", "this
  figure", "the given table" … unless the question itself carries the material: text after a
  colon or line break, a literal list such as [4, 8, 15], or a `code span`); no "complexity of
  the/this algorithm" unless the question itself introduces one before ("Design an algorithm
  … and give the complexity of the algorithm") — the paper's example of an unanswerable
  question is "the time and space complexity of unspecified algorithms".
- **knowledge_units** — the unit names (plus configured ``unit_aliases``) matched against the
  question's stemmed words: every unit whose whole name or an alias occurs is chosen, except a
  unit whose name is contained in another chosen unit's name ("Lists" inside "Singly Linked
  List"). When no name occurs, the unit whose dataset items share the most idf-weighted words
  with the question is chosen (its own original item excluded, so the original's label does
  not leak in), with a reason; with no shared word at all the criterion gets status ``error``.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bloomqg.inputs.bloom import normalize_level
from bloomqg.judges.base import JudgedItem, JudgeItem
from bloomqg.judges.verdict import CriterionVerdict, Verdict

logger = logging.getLogger(__name__)

DEFAULT_VERB_LIST = Path(__file__).resolve().parents[2] / "data" / "bloom_verbs.csv"

# A short English stop-word list: function words that say nothing about the question's content.
STOP_WORDS: frozenset[str] = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "in", "on", "at", "to", "for", "from", "by", "with", "without", "into", "onto", "about", "as", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "done", "have", "has", "had", "having", "can", "could", "shall", "should", "will", "would", "may", "might", "must", "it", "its", "it's", "this", "that", "these", "those", "there", "here", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "i", "you", "he", "she", "we", "they", "me", "him", "her", "us", "them", "my", "your", "his", "our", "their", "not", "no", "nor", "so", "than", "too", "very", "just", "also", "any", "all", "each", "every", "some", "such", "only", "own", "same", "other", "more", "most", "much", "many", "few", "one", "two", "both", "either", "neither", "between", "among", "within", "up", "down", "out", "over", "under", "again", "further", "once"]
)

#: Question-word heuristic used when no Bloom verb occurs: (pattern, level), first match wins.
QUESTION_WORD_LEVELS: tuple[tuple[str, str], ...] = (
    (r"\b(design|propose|invent|devise|write (a|an) (program|function|algorithm|code))\b", "Create"),
    ((r"\b(which is better|is it better|justify|should (you|we|one)|would you recommend|"
     r"pros and cons|worth)\b"), "Evaluate"),
    ((r"\b(difference between|differ|trade-?offs?|advantages?|disadvantages?|versus|vs\.?|"
     r"compared? (to|with))\b"), "Analyze"),
    ((r"\b(how (would|could|can|do) (you|we|one) (use|implement|apply|solve|find|compute)|"
     r"calculate|compute|how (much|many|long|far|tall|high|wide|big|large)|"
     r"what (is|are|was|will be) the (output|result|value|area|volume|perimeter|length|probability|"
     r"sum|product|total|cost|price|speed|ratio|percentage|share|mean|median))\b"), "Apply"),
    (r"^\s*(why|how (does|do|is|are|can|would))\b|\bexplain\b|\bwhat happens\b", "Understand"),
    ((r"^\s*(what (is|are|was|were|does)|define|list|name|which|who|when|where|state|"
     r"is|are|can|does|do)\b"), "Remember"),
)

#: The same heuristic for Chinese questions (no word boundaries in CJK text), highest level first.
CJK_QUESTION_WORD_LEVELS: tuple[tuple[str, str], ...] = (
    ("设计|编写|创作|构造", "Create"),
    ("判断.{0,12}(是否|合理|正确)|评价|评估", "Evaluate"),
    ("比较|区别|异同|分析", "Analyze"),
    ("多少|几[个支本块米元]|求|计算|算出|列式|解答", "Apply"),
    ("为什么|说明|解释", "Understand"),
    ("什么是|是什么|哪[个些种]|写出", "Remember"),
)

# A question or an imperative ends with '?' or '.' (maybe inside a closing quote/bracket, maybe
# followed by a short parenthesised note), a fill-in-the-blank item may end with its blank
# ("… costs ______ yuan"), a multiple-choice item with its options; a generation cut
# mid-sentence does none of these.
_SENTENCE_END = re.compile(
    r"([?.!？。！．][\"'”’)）\]」』`]*|_{3,}[^\W\d_]{0,3}[.。．]?)"
    r"(\s*[（(][^()（）]{0,40}[)）][.。．]?)?$"  # a closing note: "…？（用比例解答）"
    r"|[?？:：]\s*(\(?[A-Ea-e][).]\s*\S.*?){2,}$",  # a multiple-choice stem and its options
    re.DOTALL,
)
# Option labels ("A)", or "1)" at a line start) and LaTeX math delimiters \( \) \[ \] close no
# bracket; code spans may hold any symbols.
_NOT_BRACKETS = re.compile(r"(?<!\S)[A-Ea-e]\)|^\s*[1-9]\)|\\[()\[\]]|`[^`]*`", re.MULTILINE)
_CODE_SPAN = re.compile(r"`[^`]*`")

# Chinese/Japanese ideographs: written without spaces, so a run of them is one token here and is
# compared by character bigrams (the usual unit for Chinese text matching).
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[{_CJK}]+|[^\\W\\d_{_CJK}][^\\W{_CJK}]*(?:['+#-][^\\W{_CJK}]+)*[+#]*")
_DEBRIS = re.compile(r'(\{\s*"|"\s*:\s*["{\[\d]|```|<\|[^>]*\|>|</?s>|\[/?INST\]|\\n|'
                     r"#{2,}|\*\*)")
_PLACEHOLDER = re.compile(
    r"(\[\s*(insert|your|topic|unit|question|blank)[^\]]*\]|"
    r"<\s*(insert[^>]*|topic|unit|knowledge[ _]unit|question|concept|name)\s*>|"
    r"\bX{3,}\b|\{\s*(topic|unit|knowledge_unit|question|concept|bloom_level)\s*\}|\.\.\.\s*\?)",
    re.IGNORECASE,
)
_MISSING_MATERIAL = re.compile(
    # "the above code", "the given table": a pointer to material the question should carry
    r"\b(the|this|these|that|those)\s+(above|following|given|previous|preceding|below|attached|"
    r"provided|shown)\s+(code|figure|diagram|table|graph|image|picture|passage|program|snippet|"
    r"excerpt|output|chart|screenshot|function|algorithm|list|array|tree|example|data)\b"
    # "this figure": visual material a text question can never carry
    r"|\b(this|the|these)\s+(figure|diagram|image|picture|screenshot|chart|passage|excerpt)s?\b"
    r"|\b(shown|given|listed|displayed)\s+(above|below)\b"
    r"|\b(code|figure|diagram|table|program|snippet|example)\s+(above|below)\b",
    re.IGNORECASE,
)
_UNSPECIFIED_ALGORITHM = re.compile(
    r"\bcomplexit(y|ies) of (the|this|that|these|those|your|my) "
    r"(algorithm|code|function|program|method|solution|approach)s?\b(?!\s+(called|named|for|that|which))",
    re.IGNORECASE,
)
# Material given inline: text after a colon or line break, a literal list/set/tuple, a code span.
_CARRIED_MATERIAL = re.compile(
    r"(:|\n)\s*\S.{15,}|\[[^\]]*,[^\]]*\]|\{[^}]*,[^}]*\}|\([^)]*\d[^)]*,[^)]*\)|`[^`]+`", re.DOTALL
)
_INTRODUCES_ALGORITHM = re.compile(
    r"\b(algorithm|function|method|solution|approach|program|code|procedure|design|write|"
    r"implement|develop|propose|devise|create|describe|explain)s?\b",
    re.IGNORECASE,
)
_BRACKET_PAIRS = {")": "(", "]": "[", "}": "{"}
_BLANK = re.compile(r"_{3,}")


def light_stem(word: str) -> str:
    """A light, consistent suffix stripper: "Queues"/"queue", "hashing"/"hashed"/"hash",
    "recursion"/"recursive" map to the same stem. Not linguistics, just matching."""
    w = word.lower().strip("'")
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ations", "ation", "ions", "ion", "ive", "ing", "ed", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def words(text: str) -> list[str]:
    """The words of ``text`` in order: letter-initial words (any script; digits and a few code
    characters such as "C++" inside) and, as one token each, runs of CJK ideographs."""
    return _WORD.findall(text)


def word_count(tokens: Sequence[str]) -> float:
    """Length in words; a CJK character counts as half a word (Chinese words average about
    two characters), so length bounds mean the same in both scripts."""
    return sum(len(t) / 2 if _CJK_RUN.fullmatch(t) else 1 for t in tokens)


def _cjk_bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def match_stems(text: str, *, drop_stop_words: bool) -> list[str]:
    """Comparable tokens of ``text``: light stems of words (optionally without stop words) and
    character bigrams of CJK runs."""
    out: list[str] = []
    for word in words(text):
        if _CJK_RUN.fullmatch(word):
            out.extend(_cjk_bigrams(word))
        elif not (drop_stop_words and word.lower() in STOP_WORDS):
            out.append(light_stem(word))
    return out


def content_stems(text: str) -> list[str]:
    """Stems of the non-stop-words of ``text`` (and CJK bigrams), in order."""
    return match_stems(text, drop_stop_words=True)


def token_jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the content-stem sets of two texts (1.0 when both are empty)."""
    set_a, set_b = set(content_stems(a)), set(content_stems(b))
    if not set_a and not set_b:
        return 1.0
    return len(set_a & set_b) / len(set_a | set_b)


def is_copy(jaccard: float, ratio: float, *, max_token_jaccard: float, max_char_ratio: float) -> bool:
    """The rules judge's copy rule on its two measures of a question against its original
    (:func:`token_jaccard`, :func:`char_ratio`): either one at its threshold or above."""
    return jaccard >= max_token_jaccard or ratio >= max_char_ratio


def char_ratio(a: str, b: str) -> float:
    """difflib's similarity ratio of the lower-cased, whitespace-normalised texts."""
    norm_a, norm_b = (" ".join(t.lower().split()) for t in (a, b))
    return difflib.SequenceMatcher(None, norm_a, norm_b, autojunk=False).ratio()


def _balanced(text: str) -> bool:
    stack: list[str] = []
    for char in text:
        if char in "([{":
            stack.append(char)
        elif char in _BRACKET_PAIRS and (not stack or stack.pop() != _BRACKET_PAIRS[char]):
            return False
    return not stack


def _has_repetition(tokens: Sequence[str]) -> bool:
    lowered = [t.lower() for t in tokens]
    for n in (1, 2, 3):
        for start in range(len(lowered) - 3 * n + 1):
            gram = lowered[start : start + n]
            if n == 1 and len(gram[0]) < 2:
                continue  # "°C, °C and °C": one-letter unit symbols repeat legitimately
            if gram == lowered[start + n : start + 2 * n] == lowered[start + 2 * n : start + 3 * n]:
                return True
    return False


@dataclass
class RulesJudge:
    """The heuristic judge; build once per dataset with :meth:`from_spec`, then :meth:`judge`.

    The thresholds' defaults are the config schema's (:mod:`bloomqg.judges.backends.rules`),
    which :meth:`from_spec` fills in.
    """

    knowledge_units: Sequence[str]
    annotator: Any  # a bloomqg.inputs.verbs.VerbAnnotator (the verb rule, regexes compiled once)
    max_token_jaccard: float
    max_char_ratio: float
    min_words: int
    max_words: int
    min_alnum_share: float
    unit_aliases: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: per unit: item_id -> set of content stems of that labelled dataset item
    unit_item_stems: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def from_spec(
        cls, judge_name: str, spec: Mapping[str, Any], dataset_items: Sequence[tuple[str, str, Sequence[str]]],
        knowledge_units: Sequence[str],
    ) -> RulesJudge:
        """Build from a validated judge entry and the dataset's (item_id, question, units); keys
        the entry leaves out take the schema's defaults."""
        from bloomqg.judges.registry import judge_backend
        from bloomqg.inputs.verbs import (  # the paper's verb rule (Table 1)
            VerbAnnotator,
            load_verb_list,
        )

        spec = judge_backend("rules").with_defaults(spec)

        verb_path = Path(spec.get("verb_list", DEFAULT_VERB_LIST))
        if not verb_path.is_file():
            raise FileNotFoundError(f"judge {judge_name!r}: verb list {verb_path} not found")
        aliases = spec.get("unit_aliases", {}) or {}
        if not isinstance(aliases, Mapping):
            raise TypeError(f"judge {judge_name!r}: unit_aliases must map unit -> list of aliases")
        for unit, alias_list in aliases.items():
            if unit not in knowledge_units:
                raise ValueError(
                    f"judge {judge_name!r}: unit_aliases names {unit!r}, which is not a "
                    f"knowledge unit of the dataset ({sorted(knowledge_units)})"
                )
            if isinstance(alias_list, str) or not all(isinstance(a, str) for a in alias_list):
                raise ValueError(f"judge {judge_name!r}: unit_aliases[{unit!r}] must be a list of strings")
        unit_item_stems: dict[str, dict[str, frozenset[str]]] = {u: {} for u in knowledge_units}
        for item_id, question, units in dataset_items:
            stems = frozenset(content_stems(question))
            for unit in units:
                unit_item_stems.setdefault(unit, {})[item_id] = stems
        numeric = {k: spec[k] for k in ("max_token_jaccard", "max_char_ratio", "min_words",
                                        "max_words", "min_alnum_share")}
        return cls(
            knowledge_units=list(knowledge_units),
            annotator=VerbAnnotator(load_verb_list(verb_path)),
            unit_aliases={u: list(a) for u, a in aliases.items()},
            unit_item_stems=unit_item_stems,
            **numeric,
        )

    # -- criteria ---------------------------------------------------------------------------

    def judge_unique(self, question: str, original: str) -> CriterionVerdict:
        jaccard, ratio = token_jaccard(question, original), char_ratio(question, original)
        measures = f"token_jaccard={jaccard:.2f} (max {self.max_token_jaccard}), char_ratio={ratio:.2f} (max {self.max_char_ratio})"
        copy = is_copy(jaccard, ratio, max_token_jaccard=self.max_token_jaccard, max_char_ratio=self.max_char_ratio)
        return CriterionVerdict.ok(not copy, measures)

    def judge_level(self, question: str) -> CriterionVerdict:
        level = normalize_level(self.annotator.annotate(question))
        if level is not None:
            return CriterionVerdict.ok(level, "verb list")
        for pattern, fallback in QUESTION_WORD_LEVELS + CJK_QUESTION_WORD_LEVELS:
            match = re.search(pattern, question, re.IGNORECASE)
            if match:
                return CriterionVerdict.ok(
                    fallback, f"no Bloom verb; question-word heuristic matched {match.group(0).strip()!r}"
                )
        return CriterionVerdict.error("no Bloom verb and no known question word: not guessed")

    def judge_readable(self, question: str) -> CriterionVerdict:
        tokens = words(question)
        stripped = question.strip()
        problems: list[str] = []
        length = word_count(tokens)
        if not self.min_words <= length <= self.max_words:
            problems.append(f"{length:g} words (allowed {self.min_words}..{self.max_words})")
        if not _SENTENCE_END.search(stripped):
            problems.append("does not end as a question or sentence ('?' or '.')")
        if not _balanced(_NOT_BRACKETS.sub("", stripped)):
            problems.append("unbalanced brackets")
        debris = _DEBRIS.search(_CODE_SPAN.sub("", stripped))
        if debris:
            problems.append(f"markup/JSON debris {debris.group(0)!r}")
        if _has_repetition(tokens):
            problems.append("a word or phrase repeated three times in a row")
        # Blanks of fill-in items are content, not noise; letters and digits are the text.
        visible = [c for c in _BLANK.sub("", stripped) if not c.isspace()]
        alnum_share = sum(c.isalnum() for c in visible) / len(visible) if visible else 0.0
        if alnum_share < self.min_alnum_share:
            problems.append(
                f"only {alnum_share:.0%} letters or digits (min {self.min_alnum_share:.0%})"
            )
        if problems:
            return CriterionVerdict.ok(False, "; ".join(problems))
        return CriterionVerdict.ok(True, "all readability checks passed")

    def judge_answerable(self, question: str) -> CriterionVerdict:
        problems: list[str] = []
        if len(content_stems(question)) < 2:
            problems.append("fewer than two content words")
        placeholder = _PLACEHOLDER.search(question)
        if placeholder:
            problems.append(f"placeholder {placeholder.group(0)!r}")
        missing = _MISSING_MATERIAL.search(question)
        # "…the following code:\n x = 1" carries its material; a bare reference does not.
        carries_material = bool(_CARRIED_MATERIAL.search(question))
        if missing and not carries_material:
            problems.append(f"refers to material that is not given ({missing.group(0)!r})")
        unspecified = _UNSPECIFIED_ALGORITHM.search(question)
        # "Design an algorithm … and give the complexity of the algorithm" names what it means.
        if unspecified and _INTRODUCES_ALGORITHM.search(question[: unspecified.start()]):
            unspecified = None
        if unspecified and not carries_material:
            problems.append(f"asks about an unspecified algorithm ({unspecified.group(0)!r})")
        if problems:
            return CriterionVerdict.ok(False, "; ".join(problems))
        return CriterionVerdict.ok(True, "no unresolved reference or placeholder")

    def _name_stems(self, unit: str) -> list[frozenset[str]]:
        names = [unit, *self.unit_aliases.get(unit, [])]
        return [frozenset(match_stems(n, drop_stop_words=False)) for n in names if words(n)]

    def judge_units(self, question: str, original_item_id: str | None) -> CriterionVerdict:
        stems = set(match_stems(question, drop_stop_words=False))
        full: dict[str, frozenset[str]] = {}
        for unit in self.knowledge_units:
            matches = [name for name in self._name_stems(unit) if name <= stems]
            if matches:
                full[unit] = max(matches, key=len)
        # "List" inside "Singly Linked List": keep only the most specific matched names.
        chosen = [u for u, name in full.items()
                  if not any(name < other for v, other in full.items() if v != u)]
        if chosen:
            return CriterionVerdict.ok(chosen, "unit name or alias occurs in the question")
        return self._units_by_item_vocabulary(set(content_stems(question)), original_item_id)

    def _units_by_item_vocabulary(self, stems: set[str], original_item_id: str | None) -> CriterionVerdict:
        """The unit whose items (minus the question's own original) share the most idf-weighted
        stems with the question."""
        items = {iid: s for per_unit in self.unit_item_stems.values() for iid, s in per_unit.items()
                 if iid != original_item_id}
        n_items = len(items)
        if not stems or not n_items:
            return CriterionVerdict.error("no unit name in the question and no content words to match")
        doc_freq = Counter(stem for s in items.values() for stem in s)
        scores: dict[str, float] = {}
        for unit, per_unit in self.unit_item_stems.items():
            members = [s for iid, s in per_unit.items() if iid != original_item_id]
            if not members:
                continue
            score = 0.0
            for stem in stems:
                if doc_freq[stem]:
                    share = sum(stem in s for s in members) / len(members)
                    score += share * math.log(1 + n_items / doc_freq[stem])
            scores[unit] = score
        if not scores or max(scores.values()) <= 0:
            return CriterionVerdict.error("no unit name in the question and no word shared with any unit's items")
        best = max(scores, key=lambda u: (scores[u], -self.knowledge_units.index(u)))
        return CriterionVerdict.ok(
            [best], f"no unit name in the question; most shared words with the unit's items (score {scores[best]:.2f})"
        )

    def judge_batch(self, items: Sequence[JudgeItem]) -> list[JudgedItem]:
        """The :class:`~bloomqg.judges.base.Judge` call: :meth:`judge` on each item."""
        return [JudgedItem(self.judge(item.question, item.original_question, item.item_id)) for item in items]

    def judge(self, question: str, original_question: str, original_item_id: str | None = None) -> Verdict:
        """All five criteria for one generated question."""
        return Verdict(
            {
                "unique": self.judge_unique(question, original_question),
                "readable": self.judge_readable(question),
                "answerable": self.judge_answerable(question),
                "bloom_level": self.judge_level(question),
                "knowledge_units": self.judge_units(question, original_item_id),
            }
        )

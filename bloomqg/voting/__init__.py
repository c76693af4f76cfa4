"""Votes over a judge panel (strict majority or Dawid–Skene), per-item agreement, Krippendorff's
α and Gwet's AC1 with the gate, and per-judge diagnostics.

One concern per module: :mod:`~bloomqg.voting.majority` (vote strings, strict majorities,
*useful*), :mod:`~bloomqg.voting.alpha` (coding votes for the ``krippendorff`` package, α with its
bootstrap interval; also used by the release and the human annotation),
:mod:`~bloomqg.voting.agreement` (percent agreement, prevalence, AC1, the gate's coefficient),
:mod:`~bloomqg.voting.dawid_skene` (the Dawid–Skene model), :mod:`~bloomqg.voting.diagnostics`
(each judge against the others, the effective number of judges) and :mod:`~bloomqg.voting.cell`
(one cell's votes and reliability tables, with the gate). Nothing is imported here. The user's
view of the reliability measures is docs/judge-reliability.md.

Decisions (the paper says "majority voting across models" and "discard low-agreement cases
(Krippendorff's alpha < 0.7)"; this package pins the details down):

**Votes.** A judge's vote on a criterion is valid when its judgment row has status ``ok``;
parse failures, call errors, abstentions ("not judged by this backend") and missing questions
are no vote. A value wins when it has *more than half of the valid votes* and there are at least
``min_valid_votes`` (2) valid votes: with three judges and one parse failure, two agreeing votes
of two make a majority, a 1-1 split is a ``"tie"``, one lone vote is ``"fewer than 2 valid
votes"``. Bloom levels are voted as names (no averaging of ordinal weights). Knowledge units are
sets: a unit is in the voted set when more than half of the valid votes include it; an empty
result is null with ``"no unit has a majority"``. Agreement of an item = share of valid votes
equal to the voted value (for units: the same set).

**Useful** = unique ∧ readable ∧ answerable with three-valued logic: all three True -> True;
any definite False -> False (the paper's definition needs all three "yes", so one definite "no"
settles it even when another criterion is undecided); otherwise null.

**Krippendorff's α** per criterion over the cell (``krippendorff`` package; reliability data =
judges × items with a generated question, a missing vote is NaN): nominal for unique, readable,
answerable; ordinal for Bloom level over the value domain Remember..Create (weights 1..6, all
six levels in the domain whether observed or not); for knowledge units the sets are coded as
labels and compared with the Jaccard distance 1 − |A∩B|/|A∪B| (a custom distance, as in
Passonneau's set-valued α and NLTK's ``AnnotationTask``): one judge's {Stacks} against another's
{Stacks, Recursion} is half a disagreement, not a whole one. Its ``level_of_measurement`` is
recorded as ``"jaccard"``. The confidence interval is a percentile bootstrap over items.

α is NaN in two situations, told apart by ``n_items`` (the items with at least two valid votes):
``n_items == 0`` — no item has two votes, so there is no evidence of agreement, and the gate
*fails*; ``n_items > 0`` but every pairable vote has the same value — observed disagreement is
zero and α is 0/0; the gate *passes*, since nothing disagrees (gating perfect agreement away
would be absurd).

**Gate.** A criterion passes when its gate coefficient (``gate.coefficient``: α, the paper's,
or AC1) is at least ``gate.threshold`` (``gate_alpha`` in :func:`~bloomqg.voting.cell.vote_cell`),
or in the zero-variation case above; no pairable item fails either way.
When any criterion fails, every vote row of the cell gets ``alpha_gated`` True; with
``gate_action="drop"`` the failing criteria's votes (and agreement) also become null with
reason ``"alpha gate"`` and ``useful`` is recomputed; ``"flag"`` keeps them.

The reliability table has one panel row per criterion (``judge`` null: α, CI, gate) and one row
per judge and criterion: ``agreement_with_majority`` (share of the items with a majority and a
valid vote from the judge where the judge voted with the majority) and ``parse_failure_rate``
(share of the judge's rows for items with a question whose status is ``parse_failed``; call
errors and abstentions are not parse failures); their ``n_items`` counts the items with a
question, their α columns and ``gate_passed`` are null.

**Dawid–Skene aggregation** (``vote.aggregation: dawid_skene``): unique, readable, answerable
and Bloom level take each item's most probable label under a Dawid–Skene model fitted on the
cell's judged items (items with fewer than ``min_valid_votes`` valid votes keep their null and
reason); ``agreement`` is then the share of valid votes equal to that label and
``<criterion>_posterior`` its posterior probability. Knowledge units stay a majority of sets.
α, AC1 and the per-judge diagnostics describe the votes and do not change with the aggregation;
``agreement_with_majority`` is then agreement with the Dawid–Skene label.
"""

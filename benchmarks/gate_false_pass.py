"""How often the gate calls a panel reliable where one answer dominates, for judges that read the
question and for judges that do not; prints one JSON object.

Where one answer holds ≥ 90% of the votes the gate reads Gwet's AC1, which stays high for judges
that say "yes" at their own rates whatever the question: they agree on the common answer by
chance. The AC1 route therefore also asks that agreement beyond chance be shown (α's bootstrap
interval above 0, and two judges sharing the rarer answer at least once). This simulates panels of
three judges on ``n`` questions, seeded, through :func:`bloomqg.voting.cell.measure_criterion`:

- ``chance``: each judge says "yes" at its own rate (0.92, 0.95, 0.97, or 0.9 each), independent
  of the question: a pass is a false pass;
- ``reads``: a true answer per question ("yes" at the prevalence), each judge gives it with
  probability ``accuracy``: a pass is right.

For each it prints the pass rate of the AC1 route alone (AC1 ≥ threshold and one shared rarer
answer, the rule before α's interval was asked for) and of the gate as it stands.

    python benchmarks/gate_false_pass.py [--panels 200] [--resamples 300] [--n 34 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bloomqg.voting.agreement import PREVALENCE_LIMIT, RELIABLE  # noqa: E402
from bloomqg.voting.cell import measure_criterion  # noqa: E402

JUDGES = ["a", "b", "c"]
DESIGNS = {
    "chance 0.92/0.95/0.97": {"rates": (0.92, 0.95, 0.97)},
    "chance 0.90 each": {"rates": (0.9, 0.9, 0.9)},
    "reads, accuracy 0.97, prevalence 0.90": {"accuracy": 0.97, "prevalence": 0.9},
    "reads, accuracy 0.95, prevalence 0.92": {"accuracy": 0.95, "prevalence": 0.92},
}


def panel(rng: np.random.Generator, n: int, rates: tuple[float, ...] = (), accuracy: float = 0.0,
          prevalence: float = 0.0) -> list[list[str]]:
    """Items × judges "1"/"0" votes of one simulated panel."""
    if rates:
        return [["1" if rng.random() < rate else "0" for rate in rates] for _ in range(n)]
    truth = rng.random(n) < prevalence
    return [["1" if (t if rng.random() < accuracy else not t) else "0" for _ in JUDGES] for t in truth]


def pass_rates(n: int, design: dict, panels: int, resamples: int, threshold: float = 0.7) -> dict[str, float]:
    rng = np.random.default_rng(n)
    ac1_route = gate = 0
    for seed in range(panels):
        measured = measure_criterion("unique", panel(rng, n, **design), JUDGES, gate_threshold=threshold,
                                     n_resamples=resamples, seed=seed)
        a = measured.agreement
        ac1_route += bool(a.prevalence >= PREVALENCE_LIMIT and a.ac1 >= threshold and a.n_items_rare_agreed > 0
                          or a.prevalence < PREVALENCE_LIMIT and measured.decision.status == RELIABLE)
        gate += measured.decision.status == RELIABLE
    return {"ac1_route_alone": ac1_route / panels, "gate": gate / panels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=300)
    parser.add_argument("--n", type=int, nargs="+", default=[34, 100])
    args = parser.parse_args()
    start = time.perf_counter()
    out = {f"n={n}": {name: pass_rates(n, design, args.panels, args.resamples) for name, design in DESIGNS.items()}
           for n in args.n}
    out["panels"], out["resamples"], out["seconds"] = args.panels, args.resamples, round(time.perf_counter() - start, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""The learned judge's top-label calibration: it moves the top class's probability, never the answer."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bloomqg.judges.learned import apply_top_label, fit_top_label, restrict


def test_a_timid_top_class_is_raised_to_its_measured_accuracy_and_keeps_its_place():
    # out of fold, answers given at 0.4 were right 3 times in 4, at 0.9 always
    probabilities = pd.DataFrame([[0.4, 0.35, 0.25]] * 4 + [[0.9, 0.05, 0.05]] * 4, columns=["a", "b", "c"])
    targets = pd.Series(["a", "a", "a", "b"] + ["a"] * 4)
    calibrator = fit_top_label(probabilities, targets)
    calibrated = apply_top_label(np.array([[0.4, 0.35, 0.25], [0.2, 0.45, 0.35]]), calibrator)
    assert np.allclose(calibrated.sum(axis=1), 1.0)
    assert calibrated[0, 0] == 0.75 and np.isclose(calibrated[0, 1] / calibrated[0, 2], 0.35 / 0.25)
    assert (calibrated.argmax(axis=1) == [0, 1]).all()


def test_a_map_that_would_lower_the_top_below_the_runner_up_leaves_it_on_top():
    probabilities = pd.DataFrame([[0.5, 0.45, 0.05]] * 4, columns=["a", "b", "c"])
    calibrator = fit_top_label(probabilities, pd.Series(["b"] * 4))  # never right: maps 0.5 to 0
    calibrated = apply_top_label(np.array([[0.5, 0.45, 0.05]]), calibrator)
    assert calibrated.argmax() == 0 and np.isclose(calibrated.sum(), 1.0)


def test_no_calibrator_leaves_probabilities_alone_and_restrict_drops_units_outside_the_inventory():
    p = np.array([[0.5, 0.3, 0.2]])
    assert apply_top_label(p, None) is p
    classes, kept = restrict(["a", "b", "c"], p, {"b", "c"})
    assert classes == ["b", "c"] and np.allclose(kept, [[0.6, 0.4]])
    # a row with no probability on the kept classes gets them uniformly
    assert np.allclose(restrict(["a", "b", "c"], np.array([[1.0, 0.0, 0.0]]), {"b", "c"})[1], [[0.5, 0.5]])

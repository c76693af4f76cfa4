"""Statistics that know no study, on the ground floor beside the store: what the judges' bias
estimates, the voting, the metrics and the annotation all compute the same way (the normal
quantile of a confidence, a correlation's Fisher-z interval)."""

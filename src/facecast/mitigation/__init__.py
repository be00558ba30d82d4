"""Bias mitigation measured, not claimed (stage ``mitigation``): score normalisation
(Z/T/ZT/S/adaptive S-norm), Fair Score Normalization, FairCal and its oracle, per-group
thresholds and score fusion, each learned on calibration identities disjoint from the
evaluated pairs and evaluated side by side with identity-clustered intervals and paired
tests against the raw scores."""

"""Model-vs-model comparisons on the same pairs, with identity-clustered paired
intervals, exact McNemar tests and Holm correction (stage ``compare``)."""

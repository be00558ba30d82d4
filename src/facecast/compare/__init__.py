"""Model-vs-model comparisons on the same pairs (stage ``compare``, ``facecast compare``):
identity-clustered paired bootstrap with a t(G-1) Wald test, Holm across every test of the
table, leaderboards ranked by the number of models significantly better."""

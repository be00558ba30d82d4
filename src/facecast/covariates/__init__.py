"""Stage ``covariates``: verification performance over continuous covariates.

A Bayesian model of the match and non-match score distributions conditioned on covariates
(McCurrie, Nicholson, Scheirer, Anthony, arXiv 2009.09583), fitted with Pyro: per class a
normal mixture whose weights and locations vary through local radial basis functions.
Modules: ``pairs`` (unique pairs + features), ``basis`` (RBF grid), ``model`` (Pyro model),
``infer`` (SVI / NUTS), ``select`` (held-out selection), ``mixture`` (CDF, quantile),
``derive`` (metrics per draw), ``stage`` (outputs), ``plots``, ``targets`` (workflow,
config checks), ``synthetic`` (known-truth generator).
"""

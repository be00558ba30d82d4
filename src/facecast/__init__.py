"""facecast: fine-grained, attribute-conditioned evaluation of face recognition."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("facecast")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+src"

#: the stage packages in pipeline order: a stage may import the ground floor (``io``,
#: ``config``, ``report``) and the stages before it, never one after it
#: (docs/CONTRIBUTING.md; tests/test_import_graph.py keeps it so)
STAGES = ("datasets", "faces", "embed", "attributes", "analysis", "evaluate", "fairness",
          "identification", "templates", "quality", "covariates", "labels", "slices",
          "compare", "mitigation")

__all__ = ["STAGES", "__version__"]

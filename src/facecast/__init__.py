"""facecast: fine-grained, attribute-conditioned evaluation of face recognition."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("facecast")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+src"

__all__ = ["__version__"]

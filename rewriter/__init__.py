"""Editor-oriented code rewriting with predicted outputs: exact speculative decoding on a local model."""
import os
from pathlib import Path

EMBEDDED_NAME = "qwen2.5-coder-0.5b-instruct"  # the model that ships with the package (weights/models.py)
# The default where the machine affords it (engine_factory.default_model).
CODER_1_5B_NAME = "qwen2.5-coder-1.5b-instruct"


def cache_root() -> Path:
    """Where converted models, timed choices and vLLM's environment are kept ($REWRITER_CACHE)."""
    root = os.environ.get("REWRITER_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rewriter"


def package_version() -> str:
    """The installed distribution's version, the one number every front end reports."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rewriter")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"

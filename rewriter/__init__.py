"""Editor-oriented code rewriting with predicted outputs: exact speculative decoding on a local model."""


def package_version() -> str:
    """The installed distribution's version, the one number every front end reports."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rewriter")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"

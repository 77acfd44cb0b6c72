"""The version of traceforge, in one place: the package, pyproject and reports read it."""

__version__ = "0.1.0"

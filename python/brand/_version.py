"""The package's version: in pyproject.toml too, and in the user agent."""

__version__ = "0.1.0"

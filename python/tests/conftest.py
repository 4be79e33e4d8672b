"""pytest's header for this suite (``python3 -m pytest python/tests``):
which torch it ran on. ``scripts/test-python.sh`` runs the suite with
unittest and prints the same line first (:func:`torch_line`)."""

from __future__ import annotations

import sys


def torch_line() -> str:
    """The torch the suite runs on: its version and where it was imported
    from, or that none is importable."""
    try:
        import torch  # noqa: PLC0415
    except ImportError as e:
        return f"torch: none importable by {sys.executable} ({e})"
    return f"torch: {torch.__version__} ({torch.__file__}), Python {sys.version.split()[0]}"


def pytest_report_header(config: object) -> str:
    return torch_line()

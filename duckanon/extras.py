"""Features that need an optional install, and where duckanon writes files nobody named.

A feature behind an extra is refused before anything runs, with the command that installs it:
never an ImportError halfway through a statement, never after a table was published.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from duckanon.errors import AnonymizeError

# module -> (extra that installs it, what needs it)
EXTRAS = {
    "matplotlib": ("report", "the HTML report"),
    "pyspark": ("spark", "engine = 'spark'"),
}

OUTPUT_DIR_VARIABLE = "DUCKANON_OUTPUT_DIR"
DEFAULT_OUTPUT_DIR = "duckanon_output"


def require(module: str) -> None:
    """Refuse, in one line naming the install command, when `module` is not installed."""
    if importlib.util.find_spec(module) is None:
        extra, feature = EXTRAS[module]
        raise AnonymizeError(f"{feature} needs {module}, which is not installed: pip install 'duckanon[{extra}]'")


def output_dir() -> Path:
    """Where reports go when the statement names no file: $DUCKANON_OUTPUT_DIR, else
    ./duckanon_output under the current directory (created on first use)."""
    return Path(os.environ.get(OUTPUT_DIR_VARIABLE) or DEFAULT_OUTPUT_DIR)


def default_report_path(table_name: str) -> Path:
    return output_dir() / f"{table_name}_report.html"

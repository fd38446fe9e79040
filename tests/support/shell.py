"""The duckdb command-line clients the tests run: the one of this environment (the duckdb-cli
package of the test extra), and the DuckDB 1.5 one the version tests need."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


def duckdb_cli() -> str | None:
    """The duckdb CLI of this environment (duckdb-cli package), else one on PATH."""
    return (shutil.which("duckdb", path=sysconfig.get_path("scripts"))
            or shutil.which("duckdb", path=str(Path(sys.executable).parent))
            or shutil.which("duckdb"))


def duckdb_15_cli() -> str:
    """The `duckdb` executable of the duckdb-cli package installed beside this Python; the test is
    skipped when there is none or it is not of the 1.5 line."""
    cli = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")
    if cli is None:
        pytest.skip("the duckdb command-line client (pip install duckdb-cli) is not installed")
    version = subprocess.run([cli, "-version"], capture_output=True, text=True, timeout=600).stdout
    if not version.startswith("v1.5"):
        pytest.skip(f"the duckdb CLI found is not the 1.5 line: {version.strip()}")
    return cli

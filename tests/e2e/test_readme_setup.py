"""The README's two setup commands, run literally in a brand-new virtual environment.

Marked `readme`: `.ci/run` runs it once, by itself, after the suite (it builds a venv and installs
the project twice, about two minutes). The inner test command runs with DUCKANON_SMOKE_ONLY set,
so the suite inside the new venv is the few smoke tests, not the whole suite a second time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from support.tiers import SMOKE_ONLY

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

pytestmark = pytest.mark.readme


def setup_commands() -> tuple[str, str]:
    """The two bash blocks of the README's Setup section: the main job, then the tests."""
    setup = README.read_text().split("## Setup", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", setup, flags=re.S)
    assert len(blocks) == 2, blocks
    return blocks[0].strip(), blocks[1].strip()


def test_setup_commands_are_the_ones_ci_runs():
    main_job, tests = setup_commands()
    assert main_job == "pip install -e . && python examples/hospital.py"
    assert tests == 'pip install -e ".[test]" && python -m pytest -q -n auto'
    assert tests in (ROOT / ".ci" / "run").read_text()


@pytest.mark.skipif(not os.environ.get("DUCKANON_README_TEST"), reason="set DUCKANON_README_TEST=1 (.ci/run does)")
def test_readme_commands_in_a_fresh_venv(tmp_path):
    if os.environ.get(SMOKE_ONLY):
        pytest.skip("inside the README test's own run")
    checkout = tmp_path / "duckanon"
    # a copy of the working tree without build leftovers, beside the shared data like the original
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", "build",
                                                                     ".pytest_cache", ".hypothesis", "output",
                                                                     "duckanon_output", ".ci-venv*"))
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    bin_dir = environment / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "DUCKANON_README_TEST")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(environment))
    main_job, tests = setup_commands()

    ran = subprocess.run(["bash", "-c", main_job], cwd=checkout, env=env, capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "ANONYMIZE hospital WITH (k = 3, l = 2" in ran.stdout
    # pip install -e . alone has no matplotlib: the report is refused in one line naming the extra
    assert "No report: the HTML report needs matplotlib, which is not installed: pip install 'duckanon[report]'" in ran.stdout
    assert "Traceback" not in ran.stderr

    ran = subprocess.run(["bash", "-c", tests], cwd=checkout, env={**env, SMOKE_ONLY: "1"}, capture_output=True,
                         text=True, timeout=1800)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert re.search(r"\b[1-9]\d* passed", ran.stdout), ran.stdout[-2000:]
    # the package was installed from the copy into the new venv, not taken from elsewhere
    where = subprocess.run([str(bin_dir / "python"), "-c", "import duckanon; print(duckanon.__file__)"],
                           capture_output=True, text=True, cwd=environment, env=env)
    assert where.stdout.strip().startswith(str(checkout)), where

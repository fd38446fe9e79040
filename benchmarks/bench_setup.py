"""Time the README's two setup commands as a new user meets them: each run in a brand-new venv.

    python benchmarks/bench_setup.py [--runs 3] [--tests-runs 1] [--skip-tests]

Prints per run the seconds of venv creation, the install and the command, and the medians. pip's
own download cache is left as it is (a user who installed anything before has one too); the
first run of a machine that never downloaded the wheels is slower by the download time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> tuple[str, str]:
    setup = (ROOT / "README.md").read_text().split("## Setup", 1)[1].split("\n## ", 1)[0]
    main_job, tests = re.findall(r"```bash\n(.*?)\n```", setup, flags=re.S)
    return main_job.strip(), tests.strip()


def timed_run(command: str, workdir: Path) -> dict:
    checkout = workdir / "duckanon"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", "build",
                                                                     ".pytest_cache", ".hypothesis", "output",
                                                                     "duckanon_output"))
    (workdir / "shared").symlink_to(ROOT.parent / "shared")
    started = time.perf_counter()
    environment = workdir / "venv"
    venv.create(environment, with_pip=True)
    created = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{environment / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(environment))
    install, run = command.split(" && ", 1)
    subprocess.run(["bash", "-c", install], cwd=checkout, env=env, check=True, capture_output=True)
    installed = time.perf_counter()
    result = subprocess.run(["bash", "-c", run], cwd=checkout, env=env, capture_output=True, text=True)
    finished = time.perf_counter()
    summary = (result.stdout.strip().splitlines() or [""])[-1]
    return {"venv": created - started, "install": installed - created, "run": finished - installed,
            "total": finished - started, "exit": result.returncode, "last line": summary[:100]}


def bench(label: str, command: str, runs: int) -> None:
    print(f"\n{label}: {command}  ({runs} runs, each in a new venv)")
    rows = []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as workdir:
            row = timed_run(command, Path(workdir))
        rows.append(row)
        print(f"  run {i + 1}: venv {row['venv']:.1f} s, install {row['install']:.1f} s, command {row['run']:.1f} s, "
              f"total {row['total']:.1f} s, exit {row['exit']}; {row['last line']}")
    for key in ("venv", "install", "run", "total"):
        values = [row[key] for row in rows]
        print(f"  {key:8s} median {statistics.median(values):7.1f} s  (min {min(values):.1f}, max {max(values):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tests-runs", type=int, default=1)
    parser.add_argument("--skip-tests", action="store_true")
    args = parser.parse_args()
    main_job, tests = setup_commands()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    bench("main job", main_job, args.runs)
    if not args.skip_tests:
        bench("tests", tests, args.tests_runs)


if __name__ == "__main__":
    main()

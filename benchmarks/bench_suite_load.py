"""The README's test command on an idle machine and beside CPU burners (issue 35, item 17).

    python benchmarks/bench_suite_load.py [--burners 0,2] [--reps 1] [--pytest-args "-q -n auto"]

Runs `python -m pytest -q -n auto` (the README's test command, in this interpreter's environment)
once per repetition and per number of burners. A burner is a subprocess that spins on one core
until it is killed; with two cores, two burners beside the suite's two workers make a load
average of about 4, the issue's target load. Prints, per run: the wall time, the pytest summary
line, the load average sampled every 5 s while it ran (mean and maximum), and the ratio of each
loaded run to the idle run of the same repetition, measured side by side in this process.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BURN = "while True: pass"


def run_suite(burners: int, pytest_args: list[str], log: Path | None = None) -> dict:
    spinning = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(burners)]
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", *pytest_args, "-p", "no:cacheprovider"],
                                cwd=REPO, capture_output=True, text=True)
    finally:
        wall = time.perf_counter() - started
        done.set()
        if log is not None:
            log.write_text(result.stdout + result.stderr)
        for process in spinning:
            process.kill()
            process.wait()
    summary = next((line for line in reversed(result.stdout.splitlines())
                    if re.search(r"\d+ (passed|failed)", line)), "(no summary line)")
    return {"burners": burners, "wall": wall, "summary": summary.strip("= "), "code": result.returncode,
            "load_mean": sum(loads) / len(loads) if loads else float("nan"),
            "load_max": max(loads) if loads else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--burners", default="0,2", help="comma-separated burner counts, the first is the yardstick")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--pytest-args", default="-q -n auto")
    parser.add_argument("--log-dir", type=Path, help="write each run's pytest output to DIR/suite_<rep>_<burners>.txt")
    args = parser.parse_args()
    counts = [int(n) for n in args.burners.split(",")]
    print(f"{os.cpu_count()} cores; python -m pytest {args.pytest_args}")
    print("| rep | burners | wall s | ratio to idle | load mean | load max | exit | summary |")
    print("|---|---|---|---|---|---|---|---|")
    for rep in range(1, args.reps + 1):
        base = None
        for burners in counts:
            log = None if args.log_dir is None else args.log_dir / f"suite_{rep}_{burners}.txt"
            run = run_suite(burners, args.pytest_args.split(), log)
            base = base or run["wall"]
            print(f"| {rep} | {burners} | {run['wall']:.0f} | {run['wall'] / base:.2f} | {run['load_mean']:.1f} | "
                  f"{run['load_max']:.1f} | {run['code']} | {run['summary']} |", flush=True)


if __name__ == "__main__":
    main()

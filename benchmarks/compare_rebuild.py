"""Before and after the orchestration rebuild (issue 17): the same benchmark cases run by the
"before" tree's own scripts on the "before" package and by the "after" tree's scripts on the
"after" package, alternating, and a markdown table of their answers and times.

    python benchmarks/compare_rebuild.py                     # before = f8f9372, after = HEAD, 5 reps
    python benchmarks/compare_rebuild.py --reps 3 --cases anonymize lattice
    python benchmarks/compare_rebuild.py --ref <commit>      # compare HEAD against another commit
    python benchmarks/compare_rebuild.py --json /tmp/compare.json

How:
- Both sides are checked out into temporary git worktrees (`git worktree add --detach`) under
  one temporary directory beside a symlink `shared` -> the repository's `../shared`, so every
  script finds the data sets exactly as it does in the repository; scripts write their result
  files into their own worktree, never into this checkout. The worktrees are removed at the end.
  The after side is a commit too (default HEAD): uncommitted changes are not measured (the
  script warns when `duckanon/` or `benchmarks/` has any).
- One Python for both (this one, e.g. /work/venv), DuckDB as installed there. Each command
  runs with PYTHONPATH=<its worktree>, so that worktree's `duckanon` wins the import over the
  editable install; a pre-check prints the package each side imports, and every run reports
  the `duckanon.__file__` it actually imported (a run that imported the wrong one aborts).
- Each command is a fresh process: `python compare_rebuild.py --harness <script> [--set
  NAME=EXPR ...] -- <args>` loads the side's benchmark script as a module, applies the
  overrides (to cut a benchmark down to a 0.5-20 s case without editing it: constants such as
  the settings it loops over), sets sys.argv and calls its `main()`, as `python <script>
  <args>` would. Cases that need no override are the script's own command line.
- Repetitions alternate: before, after, then after, before, and so on, case by case.
- Times: "wall" is the whole process (start-up, loading Adult, the benchmark's work), measured
  here; "inner" is the time the benchmark itself reports for its measured step (named per case
  below). Medians over the repetitions, with min-max. Peak RSS: ru_maxrss of the process (from
  wait4), the maximum over the repetitions.
- Answers (stars, optima, nodes evaluated, loss, levels) are parsed from what each benchmark
  prints. They are compared in full across every repetition of both sides; the table shows a
  short form. A case whose answers differ between before and after, or between repetitions of
  one side, is reported under the table.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from machine import cpu_model

REPO = Path(__file__).resolve().parents[1]
BEFORE = "f8f9372"
BENCH_MARK = "@@BENCH@@ "
PACKAGE_MARK = "@@DUCKANON@@ "


# ---------------------------------------------------------------- parsers: stdout -> answer

@dataclass
class Parsed:
    answer: object      # compared in full
    short: str          # shown in the table
    inner: float | None  # the benchmark's own time of its measured step


def _marked(stdout: str) -> list[dict]:
    return [json.loads(line[len(BENCH_MARK):]) for line in stdout.splitlines() if line.startswith(BENCH_MARK)]


def _last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


def parse_anonymize(stdout: str) -> Parsed:
    result = _marked(stdout)[-1]
    s = result["summary"]
    answer = {key: s.get(key) for key in ("rows", "classes", "min_class_size", "stars", "suppressed_rows", "method",
                                          "optimal", "published_rows")}
    answer["input_classes"] = result.get("input_classes")
    return Parsed(answer, f"{s['stars']:,} stars, {s['classes']:,} classes, {s['method']}", result["anonymize_s"])


def parse_exact(stdout: str) -> Parsed:
    methods = {r["method"]: r for r in _marked(stdout) if r["kind"] == "method"}
    answer = {name: [r["stars"], r["optimal"], r["lower_bound"]] for name, r in methods.items()}
    short = ", ".join(f"{name} {r['stars']:,}" + (" (opt)" if r["optimal"] else "") for name, r in methods.items())
    return Parsed(answer, short, methods["exact"]["seconds"] if "exact" in methods else None)


def parse_lattice_search(stdout: str) -> Parsed:
    r = _last_json(stdout)
    answer = {"levels": r["levels"], "nodes_evaluated": r["nodes_evaluated"], "metric": round(r["metric_value"], 6),
              "removed_rows": r["removed_rows"], "classes": r["classes"]}
    short = (f"{tuple(r['levels'])}, {r['nodes_evaluated']} nodes, entropy {r['metric_value']:.3f}, "
             f"removed {r['removed_rows']:,}")
    return Parsed(answer, short, r["search_s"])


def parse_lattice_big(stdout: str) -> Parsed:
    r = _last_json(stdout)
    answer = {"levels": r.get("levels"), "groups": r.get("groups")}
    short = f"levels {tuple(r['levels'])}" if r.get("levels") else f"{r.get('groups'):,} groups" if r.get("groups") else "-"
    return Parsed(answer, short, r["seconds"])


def parse_tcloseness(stdout: str) -> Parsed:
    rows = [ast.literal_eval(line) for line in stdout.splitlines() if line.startswith("{'sa'")]
    answer = [[r["sa"], r["d"], r["t"], r["method"], r["stars"], r["suppressed"], r["picked"]] for r in rows]
    by_t: dict[float, list[str]] = {}
    for r in rows:
        by_t.setdefault(r["t"], []).append(f"{r['stars']:,}")
    short = "; ".join(f"t={t}: " + "/".join(v) for t, v in by_t.items())
    return Parsed(answer, short, sum(r["seconds"] for r in rows))


def parse_tp(stdout: str) -> Parsed:
    lines = stdout.splitlines()
    head = next(line for line in lines if "runs where TP+ used more stars" in line)
    tables, current = {}, None
    for line in lines:
        if line.startswith("## "):
            current = line
        elif current and "stars" in current and re.match(r"\| \d", line):
            tables.setdefault(current, []).append(line)
    runs = int(head.split()[0])
    phases = head.split("TP ended in phase: ")[1].split(";")[0]
    worse = int(head.rsplit(":", 1)[1])
    l6 = next(line for line in tables.get("## Average stars vs l (Adult-4)", []) if line.startswith("| 6 |"))
    short = f"{runs} runs, TP phases {phases}, TP+ worse {worse}; l=6, d=4 mean stars TP/TP+/Hilbert " + \
        "/".join(l6.strip("| ").split(" | ")[1:])
    return Parsed({"head": head, "tables": tables}, short, None)


def parse_gensup(stdout: str) -> Parsed:
    rows = [line.strip("| ").split(" | ") for line in stdout.splitlines() if re.match(r"\| \d+ \| [a-z]", line)]
    answer = [row[:5] for row in rows]  # k, method, loss, stars, removed rows (not seconds)
    short = "; ".join(f"k={k} {m} {loss}" for k, m, loss, *_ in rows)
    return Parsed(answer, short, sum(float(row[5]) for row in rows))


# ---------------------------------------------------------------- the cases

@dataclass
class Case:
    bench: str
    name: str
    script: str
    args: list[str]
    parse: object
    inner: str  # what the inner time is
    overrides: list[str] = field(default_factory=list)


TC_METHODS = "METHODS=['topdown', 'carve', 'greedy']"
CASES = [
    Case("anonymize", "Adult 30,162 rows, k = 5, 8 QIs", "benchmarks/bench_anonymize.py",
         ["--case", "adult", "--phase", "anonymize", "--reps", "1", "--max-reps", "1"], parse_anonymize, "ANONYMIZE s"),
    Case("anonymize", "Adult replicated to 1M rows, k = 5", "benchmarks/bench_anonymize.py",
         ["--case", "big", "--rows", "1000000", "--phase", "anonymize", "--reps", "1", "--max-reps", "1"],
         parse_anonymize, "ANONYMIZE s"),
    Case("exact", "5,000 rows, k = 5 (greedy, mapprox, merge, exact)", "benchmarks/bench_exact.py",
         ["--case", "5000", "--request", "k5", "--time-limit", "20"], parse_exact, "exact solve s"),
    Case("exact", "30,162 rows, k = 5 (greedy, mapprox, merge, exact)", "benchmarks/bench_exact.py",
         ["--case", "30162", "--request", "k5", "--time-limit", "20"], parse_exact, "exact solve s"),
    Case("lattice", "Adult 9 QIs, k = 5, entropy, 0% suppression", "benchmarks/bench_lattice.py",
         ["--case", "search", "--limit", "0"], parse_lattice_search, "search s (best of 3)"),
    Case("lattice", "Adult 9 QIs, k = 5, entropy, 5% suppression", "benchmarks/bench_lattice.py",
         ["--case", "search", "--limit", "0.05"], parse_lattice_search, "search s (best of 3)"),
    Case("lattice", "ANONYMIZE lattice, Adult replicated to 1M rows, 8 QIs", "benchmarks/bench_lattice.py",
         ["--case", "big", "--rows", "1000000", "--what", "lattice"], parse_lattice_big, "ANONYMIZE s"),
    Case("lattice", "ANONYMIZE mondrian, Adult replicated to 1M rows, 8 QIs", "benchmarks/bench_lattice.py",
         ["--case", "big", "--rows", "1000000", "--what", "mondrian"], parse_lattice_big, "ANONYMIZE s"),
    Case("tcloseness", "Adult, SA occupation (equal), 4 QIs, t = 0.1/0.2/0.3, topdown/carve/greedy stars",
         "benchmarks/bench_tcloseness.py", [], parse_tcloseness, "sum of ANONYMIZE s",
         ["SETTINGS=SETTINGS[:1]", TC_METHODS, "ratios=lambda con, quick: []"]),
    Case("tcloseness", "Adult, SA age (ordered), 4 QIs, t = 0.1/0.2/0.3, topdown/carve/greedy stars",
         "benchmarks/bench_tcloseness.py", [], parse_tcloseness, "sum of ANONYMIZE s",
         ["SETTINGS=SETTINGS[2:3]", TC_METHODS, "ratios=lambda con, quick: []"]),
    Case("tp", "--quick: Adult, SA occupation, 3 QI sets per d, l = 2..7 and d = 1..8; n to 300k",
         "benchmarks/bench_tp.py", ["--quick"], parse_tp, "", ["plot=lambda *args: None"]),
    Case("gensup", "Adult 8 QIs, k = 5 and 10: lattice / gensup / auto, loss", "benchmarks/bench_gensup.py", [],
         parse_gensup, "sum of solve s"),
]


# ---------------------------------------------------------------- harness (one benchmark run)

def harness(argv: list[str]) -> None:
    """In a fresh process: load a benchmark script as a module, apply overrides, run its main()."""
    import atexit
    import importlib.util

    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    script, overrides = Path(argv[0]).resolve(), [a for a in argv[1:]]
    sys.path[0] = str(script.parent)  # as `python <script>` would have it
    atexit.register(lambda: print(PACKAGE_MARK + str(getattr(sys.modules.get("duckanon"), "__file__", None)),
                                  flush=True))
    spec = importlib.util.spec_from_file_location("__bench__", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules["__bench__"] = module
    spec.loader.exec_module(module)
    for override in overrides:
        name, expression = override.split("=", 1)
        if not hasattr(module, name):
            raise SystemExit(f"{script.name} has no {name} to override")
        setattr(module, name, eval(expression, vars(module)))
    sys.argv = [str(script), *rest]
    module.main()


# ---------------------------------------------------------------- driver

def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Side:
    label: str
    commit: str
    tree: Path


def run_once(side: Side, case: Case, python: str, timeout: float) -> dict:
    command = [python, str(Path(__file__).resolve()), "--harness", str(side.tree / case.script), *case.overrides,
               "--", *case.args]
    env = dict(os.environ, PYTHONPATH=str(side.tree), PYTHONWARNINGS="ignore")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=side.tree, env=env, stdout=out, stderr=err, text=True)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    record = {"side": side.label, "wall_s": wall, "rss_mib": usage.ru_maxrss / 1024, "returncode": proc.returncode}
    imported = [line[len(PACKAGE_MARK):] for line in stdout.splitlines() if line.startswith(PACKAGE_MARK)]
    record["duckanon"] = imported[-1] if imported else None
    if proc.returncode != 0:
        record["error"] = (stderr or stdout)[-1500:]
        return record
    if not (record["duckanon"] or "").startswith(str(side.tree) + os.sep):
        raise SystemExit(f"{side.label} run of {case.script} imported duckanon from {record['duckanon']}, "
                         f"not from {side.tree}")
    try:
        parsed = case.parse(stdout)
    except Exception as error:  # noqa: BLE001 - reported, the run goes on
        record["error"] = f"could not parse the output: {error!r}\n{stdout[-1500:]}"
        return record
    record.update(answer=parsed.answer, short=parsed.short, inner_s=parsed.inner)
    return record


def precheck(sides: list[Side], python: str) -> dict[str, str]:
    found = {}
    for side in sides:
        env = dict(os.environ, PYTHONPATH=str(side.tree))
        path = subprocess.run([python, "-c", "import duckanon; print(duckanon.__file__)"], cwd=tempfile.gettempdir(),
                              env=env, capture_output=True, text=True, check=True).stdout.strip()
        print(f"pre-check: {side.label} ({side.commit}) imports duckanon from {path}", file=sys.stderr)
        if not path.startswith(str(side.tree) + os.sep):
            raise SystemExit(f"the {side.label} side would import duckanon from {path}, not from {side.tree}")
        found[side.label] = path
    return found


def stats(values: list[float]) -> tuple[float, float, float] | None:
    values = [v for v in values if v is not None]
    return (statistics.median(values), min(values), max(values)) if values else None


def fmt_time(s) -> str:
    return "-" if s is None else f"{s[0]:.2f} ({s[1]:.2f}-{s[2]:.2f})"


def fmt_ratio(a, b) -> str:
    return "-" if a is None or b is None or not b[0] else f"{a[0] / b[0]:.2f}"


def summarize(case: Case, runs: list[dict]) -> dict:
    by_side = {label: [r for r in runs if r["side"] == label] for label in ("before", "after")}
    out = {"bench": case.bench, "case": case.name, "inner": case.inner, "sides": {}}
    for label, rs in by_side.items():
        ok = [r for r in rs if "error" not in r]
        answers = [json.dumps(r["answer"], sort_keys=True, default=str) for r in ok]
        out["sides"][label] = {
            "reps": len(ok), "errors": [r["error"] for r in rs if "error" in r],
            "answers": sorted(set(answers)), "short": ok[0]["short"] if ok else "error",
            "wall": stats([r["wall_s"] for r in ok]), "inner": stats([r["inner_s"] for r in ok]),
            "rss": max((r["rss_mib"] for r in ok), default=None),
        }
    before, after = out["sides"]["before"], out["sides"]["after"]
    out["stable"] = len(before["answers"]) <= 1 and len(after["answers"]) <= 1
    out["equal"] = bool(before["answers"]) and before["answers"] == after["answers"]
    return out


def markdown(summaries: list[dict], meta: dict) -> str:
    lines = [
        f"Measured {meta['date']} by `{meta['command']}`: before = `{meta['before']}`, after = `{meta['after']}`; "
        f"{meta['reps']} repetitions per side, alternating; {meta['machine']}.",
        "",
        "| benchmark | case | answer before | answer after | equal? | wall s before | wall s after | ratio "
        "| inner step | inner s before | inner s after | ratio | peak RSS MiB before / after | reps |",
        "|---|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        b, a = s["sides"]["before"], s["sides"]["after"]
        if not b["answers"] or not a["answers"]:
            equal = "**error**"
        elif s["equal"]:
            equal = "yes" if s["stable"] else "yes (varies run to run)"
        else:
            equal = "**NO**"
        rss = f"{b['rss']:.0f} / {a['rss']:.0f}" if b["rss"] and a["rss"] else "-"
        lines.append(
            f"| {s['bench']} | {s['case']} | {b['short']} | {a['short']} | {equal} | {fmt_time(b['wall'])} "
            f"| {fmt_time(a['wall'])} | {fmt_ratio(a['wall'], b['wall'])} | {s['inner'] or '-'} | {fmt_time(b['inner'])} "
            f"| {fmt_time(a['inner'])} | {fmt_ratio(a['inner'], b['inner'])} | {rss} | {b['reps']} / {a['reps']} |")
    lines += ["", "Times are medians (min-max) in seconds; ratio = median after / median before. \"wall\" is the "
              "whole process (start-up and loading Adult included), \"inner\" the step the benchmark itself times."]
    problems = []
    for s in summaries:
        b, a = s["sides"]["before"], s["sides"]["after"]
        for label, side in (("before", b), ("after", a)):
            for error in side["errors"][:1]:
                problems.append(f"- **{s['bench']} / {s['case']}: the {label} run failed** "
                                f"({len(side['errors'])} of the runs): `{error.strip().splitlines()[-1][:300]}`")
        if b["answers"] and a["answers"] and not s["equal"]:
            problems.append(f"- **ANSWER CHANGED: {s['bench']} / {s['case']}**\n  - before: `{' | '.join(b['answers'])[:3000]}`"
                            f"\n  - after: `{' | '.join(a['answers'])[:3000]}`")
        elif not s["stable"]:
            problems.append(f"- {s['bench']} / {s['case']}: answers vary between repetitions of one side "
                            f"(before {len(b['answers'])} distinct, after {len(a['answers'])})")
    if problems:
        lines += ["", "Differences and failures:", "", *problems]
    else:
        lines += ["", "Every answer is identical before and after, in every repetition."]
    return "\n".join(lines) + "\n"


def machine_note(python: str) -> str:
    cpu = cpu_model()
    versions = subprocess.run([python, "-c", "import duckdb, platform; print(platform.python_version(), duckdb.__version__)"],
                              capture_output=True, text=True, check=True).stdout.split()
    return (f"{os.cpu_count()} cores ({cpu}), shared with other work; Python {versions[0]}, DuckDB {versions[1]}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--harness":
        harness(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--ref", default=BEFORE, help=f"the 'before' commit (default {BEFORE}, where the rebuild began)")
    parser.add_argument("--after", default="HEAD", help="the 'after' commit (default HEAD)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per side and case (default 5)")
    parser.add_argument("--cases", nargs="+", choices=sorted({c.bench for c in CASES}), help="only these benchmarks")
    parser.add_argument("--python", default=sys.executable, help="the Python both sides run with (default: this one)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before one run is killed")
    parser.add_argument("--json", type=Path, help="also write every run and the summary here")
    args = parser.parse_args()

    cases = [c for c in CASES if not args.cases or c.bench in args.cases]
    before_commit = git("rev-parse", "--short", args.ref)
    after_commit = git("rev-parse", "--short", args.after)
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "duckanon", "benchmarks")
    if dirty and args.after == "HEAD":
        print("warning: uncommitted changes under duckanon/ or benchmarks/ are not measured (the after side is "
              f"HEAD = {after_commit}):\n{dirty}", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="duckanon_compare_"))
    (work / "shared").symlink_to((REPO.parent / "shared").resolve())
    sides = [Side("before", before_commit, work / "before"), Side("after", after_commit, work / "after")]
    added = []
    try:
        for side in sides:
            git("worktree", "add", "--detach", str(side.tree), side.commit)
            added.append(side.tree)
        precheck(sides, args.python)
        runs: dict[str, list[dict]] = {c.name: [] for c in cases}
        for rep in range(args.reps):
            for case in cases:
                order = sides if rep % 2 == 0 else sides[::-1]
                for side in order:
                    record = run_once(side, case, args.python, args.timeout)
                    record["rep"] = rep
                    runs[case.name].append(record)
                    print(f"rep {rep + 1}/{args.reps} {case.bench} / {case.name} / {side.label}: "
                          f"{record['wall_s']:.2f} s" + (" ERROR" if "error" in record else f", {record.get('short')}"),
                          file=sys.stderr, flush=True)
    finally:
        for tree in added:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    summaries = [summarize(c, runs[c.name]) for c in cases]
    command = "python benchmarks/compare_rebuild.py " + " ".join(sys.argv[1:])
    meta = {"date": dt.date.today().isoformat(), "command": command.strip(), "before": before_commit,
            "after": after_commit, "reps": args.reps, "machine": machine_note(args.python)}
    print(markdown(summaries, meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summaries": summaries, "runs": runs}, indent=1, default=str))


if __name__ == "__main__":
    main()

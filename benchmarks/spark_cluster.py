"""A Spark standalone cluster on this machine: one master and N workers, each its own JVM process
started with pyspark's `bin/spark-class`, bound to 127.0.0.1 on free ports, their logs and work
directories in one temporary directory. Used by benchmarks/bench_spark.py and by
tests/e2e/test_spark_cluster.py (which loads this file by path).

    with StandaloneCluster(workers=2, cores=1, memory="2g") as cluster:
        spark = cluster.session(executor_memory="1g")
        ...

Every process is started in its own session (process group) and stopped by that group's id on
exit, whatever happened: SIGTERM, then SIGKILL after a grace period. Nothing else is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"


def spark_home() -> Path:
    """pyspark's own directory: the pip package ships bin/spark-class and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class ClusterError(RuntimeError):
    pass


class StandaloneCluster:
    """A master and `workers` workers, each with `cores` cores and `memory` for its executors."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "2g", daemon_memory: str = "256m",
                 start_timeout: float = 90.0):
        self.workers, self.cores, self.memory = workers, cores, memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.directory: Path | None = None
        self.processes: list[tuple[str, subprocess.Popen]] = []
        self.url = ""
        self.ui_port = 0
        self.sessions = []

    # ------------------------------------------------------------------ processes
    def _environment(self) -> dict:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOG_DIR": str(self.directory / "logs"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,  # the master's and workers' own heaps
            "PYSPARK_PYTHON": sys.executable,
        })
        env.pop("SPARK_CONF_DIR", None)
        return env

    def _start(self, name: str, *arguments: str) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "wb")
        try:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *arguments], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self._environment(), cwd=self.directory, start_new_session=True)
        finally:
            log.close()
        self.processes.append((name, process))
        return process

    def _master_state(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=2) as reply:
                return json.load(reply)
        except OSError:
            return None

    def _wait(self, what: str, ready) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for name, process in self.processes:
                if process.poll() is not None:
                    raise ClusterError(f"the Spark {name} exited with {process.returncode} while waiting for {what}: "
                                       f"{self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.25)
        raise ClusterError(f"timed out after {self.start_timeout:.0f} s waiting for {what}")

    def start(self) -> "StandaloneCluster":
        self.directory = Path(tempfile.mkdtemp(prefix="duckanon-spark-cluster-"))
        (self.directory / "logs").mkdir()
        port, self.ui_port = free_port(), free_port()
        self.url = f"spark://{HOST}:{port}"
        try:
            self._start("master", "org.apache.spark.deploy.master.Master",
                        "--host", HOST, "--port", str(port), "--webui-port", str(self.ui_port))
            self._wait("the master", lambda: (self._master_state() or {}).get("status") == "ALIVE")
            for i in range(self.workers):
                work = self.directory / f"worker{i}"
                work.mkdir()
                self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                            "--port", str(free_port()), "--webui-port", str(free_port()),
                            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work), self.url)
            self._wait(f"{self.workers} workers", lambda: len(self.alive_workers()) == self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def alive_workers(self) -> list[dict]:
        state = self._master_state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def worker_pids(self) -> list[int]:
        return [p.pid for name, p in self.processes if name.startswith("worker")]

    def log_tail(self, name: str, lines: int = 5) -> str:
        path = self.directory / f"{name}.log"
        text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        return " | ".join(text[-lines:])

    # ------------------------------------------------------------------ a session on it
    def session(self, app: str = "duckanon-cluster", executor_memory: str = "1g", driver_memory: str = "2g",
                config: dict | None = None):
        """A SparkSession whose executors run on the workers (one per worker, `cores` each); the
        driver is this Python process's JVM. Stopped by stop() if still running."""
        from pyspark.sql import SparkSession

        if SparkSession.getActiveSession() is not None:
            raise ClusterError("another SparkSession is active in this process: stop it first")
        warehouse = self.directory / "warehouse"
        builder = (SparkSession.builder.master(self.url).appName(app)
                   .config("spark.driver.host", HOST).config("spark.driver.bindAddress", HOST)
                   .config("spark.driver.memory", driver_memory).config("spark.executor.memory", executor_memory)
                   .config("spark.executor.cores", str(self.cores))
                   .config("spark.cores.max", str(self.cores * self.workers))
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.warehouse.dir", str(warehouse))
                   .config("spark.local.dir", str(self.directory / "local"))
                   .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
                   .config("spark.pyspark.python", sys.executable))
        for key, value in (config or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        self.sessions.append(spark)
        self._wait("the executors", lambda: self.executors(spark) >= self.workers)
        return spark

    @staticmethod
    def executors(spark) -> int:
        """Executors registered with the driver (the driver itself not counted)."""
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        return status.size() - 1

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop the sessions, then every process this cluster started (by its process group),
        then remove the temporary directory. Safe to call twice."""
        for spark in self.sessions:
            try:
                spark.stop()
            except Exception:  # the JVM may already be gone
                pass
        self.sessions = []
        for name, process in reversed(self.processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for name, process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
        self.processes = []
        if self.directory is not None and not os.environ.get("DUCKANON_KEEP_CLUSTER_LOGS"):
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False


def tasks_per_worker(cluster: StandaloneCluster) -> dict[str, int]:
    """Tasks each worker's executors finished, read from the executors' own logs (stderr in the
    worker's work directory): the proof that the work ran on the workers, not in the driver."""
    counts = {}
    for i in range(cluster.workers):
        logs = (cluster.directory / f"worker{i}").glob("app-*/*/stderr")
        counts[f"worker{i}"] = sum(path.read_text(errors="replace").count("Finished task") for path in logs)
    return counts


def run_statements(parquet: str, table: str, jobs: list[dict], workers: int = 2, memory: str = "2g",
                   executor_memory: str = "1g") -> dict:
    """Start a cluster, read `parquet` as the temp view `table`, run each job's ANONYMIZE (`sql`)
    through duckanon.spark.execute and collect its published table (`target`); stop the cluster."""
    from duckanon.spark import execute

    with StandaloneCluster(workers=workers, memory=memory) as cluster:
        spark = cluster.session(executor_memory=executor_memory)
        spark.read.parquet(parquet).createOrReplaceTempView(table)
        out = {"master": cluster.url, "executors": StandaloneCluster.executors(spark),
               "default_parallelism": spark.sparkContext.defaultParallelism, "results": []}
        for job in jobs:
            summary = execute(spark, job["sql"])
            frame = spark.table(job["target"])
            rows = [[None if v is None else str(v) for v in row] for row in frame.collect()]
            out["results"].append({"summary": json.loads(summary.to_json()), "columns": frame.columns, "rows": rows})
        spark.stop()
        out["tasks_per_worker"] = tasks_per_worker(cluster)
        out["pids"] = [process.pid for _, process in cluster.processes]
    return out


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parquet", help="run ANONYMIZE on this file (else: a smoke run)")
    parser.add_argument("--table", default="source", help="the temp view the file is read as")
    parser.add_argument("--jobs", help='JSON file: [{"sql": "ANONYMIZE ...", "target": "name"}, ...]')
    parser.add_argument("--out", help="write the results here as JSON")
    args = parser.parse_args()
    if args.parquet:
        result = run_statements(args.parquet, args.table, json.loads(Path(args.jobs).read_text()))
        Path(args.out).write_text(json.dumps(result))
        return
    with StandaloneCluster() as cluster:  # a smoke run: start, one job on the executors, stop
        print("master", cluster.url, "workers", [w["id"] for w in cluster.alive_workers()])
        session = cluster.session()
        print("executors", StandaloneCluster.executors(session), "default parallelism",
              session.sparkContext.defaultParallelism)
        print(session.range(1_000_000).selectExpr("sum(id)").collect())
        session.stop()
        print("tasks per worker", tasks_per_worker(cluster))


if __name__ == "__main__":
    main()

"""Spark in the tests: why it cannot run on this machine, and how a Spark table's rows lie in its
stored files."""

from __future__ import annotations

import importlib.util
import shutil


def spark_missing() -> str | None:
    """Why Spark cannot run here (no pyspark, no Java), or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'duckanon[spark]')"
    if shutil.which("java") is None:
        return "Spark needs Java 17 (java -version)"
    return None


def stored_files(spark, table: str) -> dict[str, list[tuple]]:
    """The rows of a Spark table per file (by its part number), each file's rows in stored order."""
    from pyspark.sql import functions as F

    files: dict[str, list[tuple]] = {}
    for row in spark.table(table).withColumn("file", F.input_file_name()).collect():
        files.setdefault(row["file"].rsplit("/", 1)[-1].split("-")[1], []).append(tuple(row)[:-1])
    return files

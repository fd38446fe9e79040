"""The caller's Python objects: the frame that called duckanon, whose DataFrames and Arrow tables
a statement may read by variable name, as DuckDB's replacement scans read them (`Caller`)."""

from __future__ import annotations

import sys

from duckanon.backends import BackendError

# What DuckDB's replacement scans read from a Python variable that a statement names where no table
# or view carries the name: these modules' types, each looked up only if the program imported its
# module (so without pandas or polars installed, such frames simply are not seen).
PYTHON_TABLE_TYPES = {
    "pandas": ("DataFrame",),
    "polars": ("DataFrame", "LazyFrame"),
    "pyarrow": ("Table", "RecordBatch", "RecordBatchReader"),
    "pyarrow.dataset": ("Dataset", "Scanner"),
}
# DuckDB calls (from the frame Caller.run makes) with the caller's locals beside these names
_CALLS = {
    ("execute", False): compile("__duckanon_con.execute(__duckanon_text)", "<duckanon>", "eval"),
    ("execute", True): compile("__duckanon_con.execute(__duckanon_text, __duckanon_values)", "<duckanon>", "eval"),
    ("sql", False): compile("__duckanon_con.sql(__duckanon_text)", "<duckanon>", "eval"),
    ("sql", True): compile("__duckanon_con.sql(__duckanon_text, params=__duckanon_values)", "<duckanon>", "eval"),
}


def _is_duckanon(frame) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return name == "duckanon" or name.startswith("duckanon.")


def is_python_table(value) -> bool:
    """Whether DuckDB reads `value` as a table by its variable's name (PYTHON_TABLE_TYPES)."""
    for module_name, names in PYTHON_TABLE_TYPES.items():
        module = sys.modules.get(module_name)
        if module is not None and isinstance(value, tuple(getattr(module, n) for n in names if hasattr(module, n))):
            return True
    return False


class Caller:
    """The Python frame that called duckanon (the first frame outside the package), whose variables
    a statement may read by name as DuckDB's replacement scans read them: the frame's locals, then
    its globals, and with `SET python_scan_all_frames = true` the frames that called it, in turn;
    none with `python_enable_replacements` or `enable_external_access` off. A table or view of the
    name always wins. Made where the caller enters duckanon (in the caller's thread)."""

    def __init__(self):
        frame = sys._getframe(1)
        while frame is not None and _is_duckanon(frame):
            frame = frame.f_back
        self.frame = frame

    def run(self, con, method: str, text: str, values=None):
        """`con.execute(text[, values])` or `con.sql(...)` (`method`) for plain SQL, run by DuckDB
        from a frame holding the caller's locals and globals: DuckDB's replacement scans look at
        the innermost Python frame, which would otherwise be duckanon's. DuckDB resolves every
        name itself (tables first, its settings, its types, a relation's lazy reads in DuckDB 2)."""
        names = {"__duckanon_con": con, "__duckanon_text": text, "__duckanon_values": values}
        if self.frame is None:
            return eval(_CALLS[method, values is not None], {}, names)  # noqa: S307 (our own code, never text)
        return eval(_CALLS[method, values is not None], self.frame.f_globals,  # noqa: S307
                    {**self.frame.f_locals, **names})

    def _frames(self, backend):
        try:
            enabled, all_frames = backend.replacement_scans()
        except BackendError:  # e.g. an aborted transaction: the statement then gets DuckDB's error
            return
        frame = self.frame
        while enabled and frame is not None:
            yield frame
            if not all_frames:
                return
            frame = frame.f_back

    def find(self, backend, name: str):
        """The Python object DuckDB's replacement scan would read for `name` on the statement's
        DuckDB backend (None if none); whether a table or view carries the name is for the caller
        to check first."""
        for frame in self._frames(backend):
            for scope in (frame.f_locals, frame.f_globals):
                if name in scope:
                    value = scope[name]
                    return value if is_python_table(value) else None
        return None

    @staticmethod
    def readable(value):
        """`value` in a form that can be read more than once, as our statements read their source
        (the histogram, the join back, the checks): a stream (an Arrow RecordBatchReader or
        Scanner) is read once into an Arrow table, a polars LazyFrame collected once, so that every
        read of one statement sees the same rows; a table or a DataFrame as it is."""
        pyarrow, dataset, polars = (sys.modules.get(m) for m in ("pyarrow", "pyarrow.dataset", "polars"))
        if pyarrow is not None and isinstance(value, pyarrow.RecordBatchReader):
            return value.read_all()
        if dataset is not None and isinstance(value, dataset.Scanner):
            return value.to_table()
        if polars is not None and isinstance(value, polars.LazyFrame):
            return value.collect()
        return value

"""The pipeline of ANONYMIZE, one module per step over a backend:

    plan (bind the statement to the catalog) -> histogram (one GROUP BY: the class histogram)
    -> problem (the solver's input; the solve) -> materialize (the published table)
    -> result (the summary row) and provenance (the table's comment).

`duckanon.pipeline.problem.prepare(con, text)` builds the solver's input as ANONYMIZE does.
"""

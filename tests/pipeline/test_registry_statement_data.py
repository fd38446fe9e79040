"""The registry stores the bound statement as typed data and REFRESH rebuilds it from that data
through ANONYMIZE's own binder: every option survives the round trip, and data that is not the
structure is refused as corrupt, never read as SQL."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest

from duckanon.pipeline import registry
from duckanon.sql import statement_for
from duckanon.sql.options import ANONYMIZE_OPTIONS

SOURCE = registry.table_of("db", "main", "t")
TARGET = registry.table_of("db", "main", "t_anon")

STATEMENTS = [
    "ANONYMIZE t WITH (k = 3, l = 2, l_variant = 'recursive', c = 1.5, qi = (\"Zip Code\", age), sensitive = (s, s2), "
    "keep = (id), identifiers = (mrn, phone), mask = (mrn = 'pseudonym', phone = 'partial(0, 2)'), "
    "mask_key = 'env:KEY', method = 'greedy', seed = 5, time_limit = 2.5, memory_limit = '512MiB', "
    "patterns = ((\"Zip Code\", age), (age)), engine = 'duckdb')",
    "ANONYMIZE t WITH (k = 2, t = 0.25, t_distance = 'ordered', sa_order = ('low', NULL, 'o''high'), sensitive = s, "
    "qi = (a), materialize = 'view', report = '/tmp/x.html', risk_threshold = 0.3)",
    "ANONYMIZE t WITH (k = 2, t = 0.2, t_distance = 'hierarchical', sa_hierarchy = 'h.csv', sensitive = s, "
    "method = 'lattice', hierarchies = 'h_{column}.csv', suppression_limit = 0.05, metric = 'loss', "
    "weights = (a = 2, b = 0.5))",
    "ANONYMIZE t WITH (k_map = 3, population = other.main.pop, population_weight = w, method = 'lattice', "
    "hierarchies = (a = 'intervals(5, 10)', b = 'prefix'), delta_presence = (0, 0.5))",
    "ANONYMIZE t WITH (population_uniqueness = 0.01, population_size = 100000, estimator = 'dankar', "
    "average_risk = 0.2, highest_risk = 0.5, beta_likeness = 1.5, beta_variant = 'enhanced', sensitive = s)",
    "ANONYMIZE t WITH (k_map = 4, population_size = 5000, estimator = 'poisson', significance = 0.05, "
    "delta_disclosure = 1.2, sensitive = s)",
    "ANONYMIZE t WITH (k = (2, 3, 5), qi = (a), report = 'r.html')",
]

COMPARED = [f.name for f in fields(statement_for(STATEMENTS[0])) if f.name not in ("source", "target", "text", "population")]


def _plan(statement):
    population = statement.population
    if population is not None and len(population.table.parts) == 2:  # as the backend resolves it
        population = type(population)(registry.table_of("other", population.table.db, population.name))
    return SimpleNamespace(statement=statement, population=population)


@pytest.mark.parametrize("text", STATEMENTS)
def test_every_option_survives_the_round_trip(text):
    statement = statement_for(text)
    data = json.loads(json.dumps(registry.statement_data(_plan(statement), "db", registry.given_options(text))))
    rebuilt, given = registry.rebuild(data, "db", SOURCE, TARGET)
    assert given == registry.given_options(text)
    for name in COMPARED:
        if name == "seed" and "seed" not in given:  # a fresh one per run, as ANONYMIZE draws
            continue
        assert getattr(rebuilt, name) == getattr(statement, name), name
    if statement.population is not None:
        assert rebuilt.population.sql() == '"other"."main"."pop"'
    assert rebuilt.source.sql() == '"db"."main"."t"' and rebuilt.target.sql() == '"db"."main"."t_anon"'


def test_every_option_of_anonymize_has_a_stored_form():
    assert sorted(registry.OPTION_NAMES) == sorted(ANONYMIZE_OPTIONS)


def test_a_statement_without_a_seed_gets_a_fresh_one():
    text = "ANONYMIZE t WITH (k = 3)"
    data = registry.statement_data(_plan(statement_for(text)), "db", registry.given_options(text))
    seeds = {registry.rebuild(data, "db", SOURCE, TARGET)[0].seed for _ in range(5)}
    assert len(seeds) == 5


@pytest.mark.parametrize("data", [
    None, [], {"format": 1, "options": [["k", 3]]}, {"format": 2}, {"format": 2, "options": [["k", "3"]]},
    {"format": 2, "options": [["k", True]]}, {"format": 2, "options": [["k", 3], ["k", 3]]},
    {"format": 2, "options": [["k", 3], ["drop", "table"]]}, {"format": 2, "options": [["k", 0]]},
    {"format": 2, "options": [["k", 3], ["qi", "a); DROP TABLE victim; --"]]},
    {"format": 2, "options": [["k", 3], ["qi", []]]}, {"format": 2, "options": [["k", 3], ["qi", [None]]]},
    {"format": 2, "options": [["k", 3], ["method", "lattice; DROP TABLE victim"]]},
    {"format": 2, "options": [["k", 3], ["weights", {"a": "2"}]]},
    {"format": 2, "options": [["k", 3], ["mask", {"a": "hash"}]]},
    {"format": 2, "options": [["k", 3], ["population", ["a", "b", "c", "d"]]]},
    {"format": 2, "options": [["t", 0.5]]},  # t needs a sensitive column: the binder refuses it
    {"format": 2, "options": [["k", float("inf")]]},
])
def test_data_that_is_not_the_structure_is_corrupt(data):
    with pytest.raises(registry.Corrupt):
        registry.rebuild(data, "db", SOURCE, TARGET)


@pytest.mark.parametrize("text", STATEMENTS)
def test_a_statement_without_its_text_is_stored_by_the_options_that_differ_from_the_defaults(text):
    statement = replace(statement_for(text), text="")  # built in Python: no text to read the options from
    data = registry.statement_data(_plan(statement), "db", registry.options_set(statement))
    rebuilt, _ = registry.rebuild(json.loads(json.dumps(data)), "db", SOURCE, TARGET)
    for name in COMPARED:
        assert getattr(rebuilt, name) == getattr(statement, name), name

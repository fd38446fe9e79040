"""What is asked of a solve, derived once from its privacy models.

A `Request` holds the models and answers what the solvers need to know about them as a whole:
the size every group must reach (`k`, `min_group_size`), whether the SA matters at all
(`k_only`), and the models of each family. ARX's ARXConfiguration plays this part
(getMinimalGroupSize, getPrivacyModels(Class)). It is a sequence of its models, so code that
only tests groups (`all_satisfied(request, ...)`, `for model in request`) takes it as it took
the list.

An `Instance` is everything a method runs on: the histogram, the request, the user's star
patterns and, for the generalizing methods, the columns' `Domains`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from duckanon.solver.histogram import Histogram
from duckanon.solver.models import (DistinctLDiversity, FrequencyLDiversity, KAnonymity, LDiversity, PrivacyModel,
                                    TCloseness)


class Request:
    def __init__(self, models):
        self.models: tuple[PrivacyModel, ...] = tuple(models)

    @classmethod
    def of(cls, models) -> Request:
        """`models` as a Request (itself when it already is one)."""
        return models if isinstance(models, Request) else cls(models)

    def __iter__(self):
        return iter(self.models)

    def __len__(self):
        return len(self.models)

    def __bool__(self):
        return bool(self.models)

    def __getitem__(self, index):
        return self.models[index]

    def __repr__(self):
        return f"Request({list(self.models)!r})"

    # -- capabilities (from the models' flags) ----------------------------------------------------
    @cached_property
    def k_only(self) -> bool:
        """No model reads the SA, the population or the whole release: a group is decided by its
        size alone."""
        return not any(m.needs_sa or m.needs_population or m.global_constraint for m in self.models)

    @cached_property
    def needs_sa(self) -> bool:
        return any(m.needs_sa for m in self.models)

    @cached_property
    def min_group_size(self) -> int:
        """The smallest group any model allows (l-diversity needs l rows, t-closeness some size too)."""
        return max([m.min_group_size() for m in self.models], default=1)

    @cached_property
    def monotone_with_suppression(self) -> bool:
        return all(m.monotone_with_suppression for m in self.models)

    @cached_property
    def closed_under_merging(self) -> bool:
        return all(m.closed_under_merging for m in self.models)

    @cached_property
    def monotone_with_generalization(self) -> bool:
        return all(m.monotone_with_generalization for m in self.models)

    @cached_property
    def needs_population(self) -> bool:
        return any(m.needs_population for m in self.models)

    @cached_property
    def global_models(self) -> tuple[PrivacyModel, ...]:
        """The conditions on the whole release (average risk, population uniqueness)."""
        return tuple(m for m in self.models if m.global_constraint)

    @cached_property
    def group_only(self) -> bool:
        """Every model is decided group by group from the histogram: no global condition and no
        population counts (what the cell-suppression methods and repair assume)."""
        return not self.global_models and not self.needs_population

    @cached_property
    def not_milp_encodable(self) -> PrivacyModel | None:
        """The first model the exact MILP has no linear form of (None: it encodes them all)."""
        return next((m for m in self.models if not m.milp_encodable), None)

    # -- families ------------------------------------------------------------------------------
    def of_type(self, family: type) -> tuple:
        """The models of one class (with its subclasses), for solvers that encode a model by its
        definition (the MILP's constraints, TP's phases): ARX's getPrivacyModels(Class)."""
        return tuple(m for m in self.models if isinstance(m, family))

    def only(self, *families: type) -> bool:
        """Whether every model belongs to one of `families` (what a special-purpose solver covers)."""
        return all(isinstance(m, families) for m in self.models)

    @cached_property
    def k_anonymity(self) -> tuple[KAnonymity, ...]:
        return self.of_type(KAnonymity)

    @cached_property
    def k(self) -> int:
        """The largest k of the k-anonymity models (1 without one)."""
        return max([m.k for m in self.k_anonymity], default=1)

    @cached_property
    def diversity(self) -> tuple[LDiversity, ...]:
        return self.of_type(LDiversity)

    @cached_property
    def closeness(self) -> tuple[TCloseness, ...]:
        return self.of_type(TCloseness)

    @cached_property
    def frequency_l(self) -> int:
        """The largest l of the frequency l-diversity models (0 without one)."""
        return max([m.l for m in self.of_type(FrequencyLDiversity)], default=0)

    @cached_property
    def distinct_l(self) -> int:
        """The largest l of the distinct l-diversity models (0 without one)."""
        return max([m.l for m in self.of_type(DistinctLDiversity)], default=0)


@dataclass
class Domains:
    """What generalization needs beyond the histogram: per QI its values in code order, whether
    it is numeric, and (lattice) its bound hierarchy; the suppression limit and the metric."""

    values: list
    numeric: list
    hierarchies: list | None = None
    suppression_limit: float = 0.0
    metric: str = "entropy"
    # the user gave hierarchies: mondrian and auto publish their labels (local recoding)
    recode: bool = False
    # the population table's distinct QI vectors (codes in `values`, which then hold the values
    # of both tables) and their rows, for the population models (k_map with a table, delta_presence)
    population: tuple | None = None
    # REFRESH ... WITH (mode = 'stable'): the lattice levels to keep when they still satisfy the request
    stable_levels: tuple | None = None
    gs_factor: float = 0.5  # metric = loss: ARX's generalization/suppression factor (its default 0.5)


@dataclass
class Instance:
    """One method's input: the histogram, the request, the user's star patterns (lists of column
    indices that may be starred together; None: any) and the columns' domains (None unless a
    generalizing method runs)."""

    hist: Histogram
    request: Request
    patterns: list | None = None
    domains: Domains | None = None
    # per QI its attribute weight (ARX's setAttributeWeight), None: every column weighs 1
    weights: object = None
    # False: `auto`'s cell suppression does not run `simplex` first (gensup's cell suppression of a
    # generalized table: simplex is not work-bounded, its LP scans every pair of classes, and gensup
    # runs it once per limit; on Adult 8 QIs, k = 2, that took over 15 minutes)
    simplex_first: bool = True
    # what the solver derives once per problem (the k-anonymity lower bound: auto reads it, then solve)
    memo: dict = field(default_factory=dict, repr=False, compare=False)

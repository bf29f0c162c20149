"""Herald-driven semantic query optimisation (paper 002), the pure part.

A herald is a punctuation inside a stream that announces a range per
attribute that the tuples after it will satisfy, for a lifespan (a count of
tuples or a span of time). Given a query's conjunctive inequality
predicate, the herald in force can prove the predicate false for a whole
substream (skip it), true (pass it without evaluating), or neither
(evaluate, possibly fewer atoms). The modules, bottom up:

* ``predicates`` — the atoms ``z1 θ z2`` and their conjunctions, compiled
  to row functions;
* ``patterns`` — an attribute pattern: one open or closed range;
* ``herald`` — heralds, lifespans, and what is in force on a stream;
* ``partitioner`` — splits a punctuated stream into partitions with ids;
* ``satisfiability`` — inequality graphs, minimum ranges, SAT and IMP;
* ``predsat`` — the per-herald decisions for selects and joins (PredSAT);
* ``select`` / ``join`` — multi-modal operators run by a control table;
* ``creation`` — a herald creation operator for buffered clusters.
"""

from .join import JoinAction, MultiModalJoin, regular_join
from .herald import COUNT, TIME, Herald, HeraldConflict, HeraldViolation, Lifespan

from .partitioner import ANONYMOUS, Partition, Partitioner
from .patterns import Range
from .predicates import Atom, Attr, Const, ConstantComparison, atom, compile_conjunction, compile_pair, conjunction
from .predsat import JoinReasoner, SelectDecision, SelectReasoner, Verdict
from .satisfiability import Domain, InequalityGraph, implies, satisfiable
from .select import Action, MultiModalSelect, regular_select

__all__ = [
    "ANONYMOUS",
    "COUNT",
    "TIME",
    "Action",
    "Atom",
    "Attr",
    "Const",
    "ConstantComparison",
    "Domain",
    "Herald",
    "JoinAction",
    "MultiModalJoin",
    "HeraldConflict",
    "HeraldViolation",
    "InequalityGraph",
    "JoinReasoner",
    "Lifespan",
    "MultiModalSelect",
    "Partition",
    "Partitioner",
    "Range",
    "SelectDecision",
    "SelectReasoner",
    "Verdict",
    "atom",
    "compile_conjunction",
    "compile_pair",
    "conjunction",
    "implies",
    "regular_join",
    "regular_select",
    "satisfiable",
]

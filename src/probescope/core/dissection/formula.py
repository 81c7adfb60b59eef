"""Compositional explanations as left-deep logical formulas over concept labels, their text form and its parser.

A formula is a first atom followed by `(operator, atom)` steps: `((a OR b) AND NOT c)`. NOT only ever applies to the
atom being added, so the left-deep list form is complete for what the beam search builds, and it gives a cheap,
hashable key that the count caches share across units.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from probescope.core.errors import InputError

OR, AND, AND_NOT = "OR", "AND", "AND NOT"
OPERATORS = (OR, AND, AND_NOT)
_OP_RANK = {op: k for k, op in enumerate(OPERATORS)}

M = TypeVar("M")


@dataclass(frozen=True, eq=True)
class Formula:
    """Left-deep formula: `atoms[0]`, then `ops[k]` joins `atoms[k + 1]` to everything before it."""

    atoms: tuple[int, ...]
    ops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.atoms or len(self.ops) != len(self.atoms) - 1:
            raise ValueError("a formula needs n atoms and n - 1 operators")
        if any(op not in _OP_RANK for op in self.ops):
            raise ValueError(f"unknown operator in {self.ops}")
        object.__setattr__(self, "_hash", hash((self.atoms, self.ops)))  # formulas key every cache: hash once

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def atom(cls, label: int) -> Formula:
        return cls((int(label),))

    def extend(self, op: str, label: int) -> Formula:
        return Formula(self.atoms + (int(label),), self.ops + (op,))

    @property
    def length(self) -> int:
        """Number of atoms (the 'length' of the papers)."""
        return len(self.atoms)

    @property
    def parent(self) -> Formula | None:
        """The formula this one grew from (None for an atom)."""
        return Formula(self.atoms[:-1], self.ops[:-1]) if self.ops else None

    def sort_key(self) -> tuple:
        """Deterministic tie-break among equal scores: fewer atoms, then lower label numbers in order of
        appearance, then operators in the order OR < AND < AND NOT."""
        return (len(self.atoms), self.atoms, tuple(_OP_RANK[op] for op in self.ops))

    def evaluate(self, atom_value: Callable[[int], M]) -> M:
        """Combine per-atom values (boolean arrays, or Python bools) with &, | and ~."""
        value = atom_value(self.atoms[0])
        for op, label in zip(self.ops, self.atoms[1:]):
            other = atom_value(label)
            if op == OR:
                value = value | other
            elif op == AND:
                value = value & other
            else:
                value = value & ~other
        return value

    def text(self, names: Mapping[int, str]) -> str:
        """`((red-c AND circle) AND NOT sky-s)`: every binary operation parenthesised, left-deep."""
        out = names[self.atoms[0]]
        for op, label in zip(self.ops, self.atoms[1:]):
            out = f"({out} {op} {names[label]})"
        return out

    def to_json(self) -> list:
        """[a0, op1, a1, op2, a2, ...]: names-free form stored next to the text."""
        out: list = [self.atoms[0]]
        for op, label in zip(self.ops, self.atoms[1:]):
            out += [op, label]
        return out

    @classmethod
    def from_json(cls, data: list) -> Formula:
        return cls(tuple(int(x) for x in data[0::2]), tuple(str(x) for x in data[1::2]))


def parse_formula(text: str, numbers: Mapping[str, int]) -> Formula:
    """Read the text form back (`numbers` maps label names to numbers); names may contain spaces.

    The right operand of every operation is an atom, so the text is `name` or `(LEFT OP name)` with LEFT again a
    formula; among the possible splits at an operator, the one whose right side is a known name wins.
    """
    s = text.strip()
    if s in numbers:
        return Formula.atom(numbers[s])
    if not (s.startswith("(") and s.endswith(")")):
        raise InputError(f"not a formula: unknown concept or missing parentheses in {text!r}")
    inner = s[1:-1]
    if inner.startswith("("):
        depth = 0
        for end, ch in enumerate(inner):  # noqa: B007  (`end` is used after the loop)
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        candidates = [end + 1]
    else:
        candidates = [k for k, ch in enumerate(inner) if ch == " "]
    for split in candidates:
        left, rest = inner[:split], inner[split:]
        for op in (AND_NOT, AND, OR):  # AND NOT first: ' AND NOT x' also starts with ' AND '
            token = f" {op} "
            if rest.startswith(token) and rest[len(token):] in numbers:
                try:
                    base = parse_formula(left, numbers)
                except InputError:
                    continue
                return base.extend(op, numbers[rest[len(token):]])
    raise InputError(f"not a formula: cannot parse {text!r}")

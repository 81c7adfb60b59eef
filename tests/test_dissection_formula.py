"""Formula text form, parser round trip, evaluation."""

import numpy as np
import pytest

from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula, parse_formula
from probescope.core.errors import InputError

NAMES = {1: "red-c", 2: "circle", 3: "sky-s", 4: "traffic light", 5: "AND", 6: "glass (drinking)"}
NUMBERS = {v: k for k, v in NAMES.items()}


def test_text_is_left_deep_and_fully_parenthesised():
    f = Formula.atom(1).extend(AND, 2).extend(AND_NOT, 3)
    assert f.text(NAMES) == "((red-c AND circle) AND NOT sky-s)"
    assert f.length == 3 and f.parent == Formula((1, 2), (AND,))
    assert Formula.atom(3).text(NAMES) == "sky-s"


@pytest.mark.parametrize("atoms,ops", [
    ((1,), ()), ((1, 2), (OR,)), ((4, 1, 3), (AND_NOT, OR)), ((6, 4, 5, 2), (AND, AND_NOT, OR)),
    ((5, 6), (AND_NOT,)),
])
def test_parser_round_trip(atoms, ops):
    f = Formula(atoms, ops)
    assert parse_formula(f.text(NAMES), NUMBERS) == f
    assert Formula.from_json(f.to_json()) == f


def test_all_short_formulas_round_trip():
    rng = np.random.default_rng(0)
    for _ in range(200):
        atoms = tuple(int(a) for a in rng.choice(list(NAMES), size=int(rng.integers(1, 6))))
        ops = tuple(str(rng.choice([OR, AND, AND_NOT])) for _ in atoms[1:])
        f = Formula(atoms, ops)
        assert parse_formula(f.text(NAMES), NUMBERS) == f


@pytest.mark.parametrize("text", ["", "blue-c", "(red-c XOR circle)", "(red-c AND circle", "red-c AND circle",
                                  "((red-c AND circle) AND NOT)"])
def test_parser_rejects_bad_text(text):
    with pytest.raises(InputError):
        parse_formula(text, NUMBERS)


def test_evaluate_on_masks():
    a = np.array([1, 1, 0, 0], bool)
    b = np.array([1, 0, 1, 0], bool)
    c = np.array([0, 1, 1, 1], bool)
    masks = {1: a, 2: b, 3: c}
    assert (Formula((1, 2), (OR,)).evaluate(masks.get) == (a | b)).all()
    assert (Formula((1, 2, 3), (OR, AND_NOT)).evaluate(masks.get) == ((a | b) & ~c)).all()
    assert (Formula((3, 1), (AND,)).evaluate(masks.get) == (c & a)).all()


def test_sort_key_orders_ties():
    fs = [Formula((2,)), Formula((1, 2), (AND_NOT,)), Formula((1, 2), (OR,)), Formula((1,)), Formula((1, 3), (OR,))]
    assert sorted(fs, key=Formula.sort_key) == [Formula((1,)), Formula((2,)), Formula((1, 2), (OR,)),
                                               Formula((1, 2), (AND_NOT,)), Formula((1, 3), (OR,))]

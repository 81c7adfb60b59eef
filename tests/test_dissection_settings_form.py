"""The Settings panel's fields come from DissectionSettings: ranges from the fields' bounds (an end the dataclass
refuses, one step inside), tooltips from their help, choices from the dataclass, start values from the window's
preset; and every field round-trips (what is shown is what is run)."""

from __future__ import annotations

from dataclasses import fields

import pytest
from PySide6.QtWidgets import QComboBox

from probescope.app.dissection.settings_form import LABELS, SettingsForm
from probescope.core.dissection.settings import CHOICES, SEARCH_MODES, WINDOW_SETTINGS, DissectionSettings
from probescope.core.errors import InputError


@pytest.fixture
def form(qtbot):
    widget = SettingsForm()
    qtbot.addWidget(widget)
    return widget


def test_each_field_reads_its_bound_help_and_the_window_preset(form):
    by_name = {f.name: f for f in fields(DissectionSettings)}
    assert set(form.fields) | {"searches"} == set(LABELS)
    for name, widget in form.fields.items():
        f = by_name[name]
        assert widget.toolTip() == f.metadata["help"]
        if name in CHOICES:
            assert isinstance(widget, QComboBox)
            assert [widget.itemData(k) for k in range(widget.count())] == list(CHOICES[name])
            assert widget.currentData() == getattr(WINDOW_SETTINGS, name)
            continue
        bound = f.metadata["bound"]
        for end in (widget.minimum(), widget.maximum()):  # every value the field offers is a valid setting
            DissectionSettings(**{name: end})
        if bound.kind is int:
            assert (widget.minimum(), widget.maximum()) == (bound.low, bound.high)
        assert widget.value() == getattr(WINDOW_SETTINGS, name)
    assert set(form.search_boxes) == set(SEARCH_MODES)
    assert {m for m, box in form.search_boxes.items() if box.isChecked()} == set(WINDOW_SETTINGS.searches)


def test_the_quantile_offers_its_whole_open_range(form):
    """(0, 1) as the dataclass says, not a range of the panel's own (it had 0.0001-0.5)."""
    quantile = form.fields["quantile"]
    with pytest.raises(InputError):
        DissectionSettings(quantile=0.0)
    assert (quantile.minimum(), quantile.maximum()) == (0.0001, 0.9999)


def test_shown_settings_come_back_as_they_were(form):
    chosen = DissectionSettings(quantile=0.02, beam_size=7, beam_limit=50, beam_dedupe="none", max_length=4,
                                min_samples=3, searches=("iou", "optimal"), iou_scope="category", sweep_length=2,
                                da_limit=6, device="cpu", cache_mb=99, jobs=2)
    form.show_settings(chosen)
    assert form.settings() == chosen  # the fields without a widget (device, cache size) stay as shown
    form.fields["max_length"].setValue(5)
    form.search_boxes["da-stop"].setChecked(True)
    again = form.settings()
    assert (again.max_length, again.searches, again.cache_mb) == (5, ("iou", "da-stop", "optimal"), 99)

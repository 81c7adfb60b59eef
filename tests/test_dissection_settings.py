"""DissectionSettings is the one source of the settings: defaults, the command line's options, the manifest's
[settings], saved results and the GUI read and write them through it."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from probescope.cli.dissect import settings_from_args
from probescope.core.dissection.settings import SPEED_ONLY, DissectionSettings
from probescope.core.errors import InputError
from probescope.main import build_parser


def test_mapping_round_trip_and_protocol():
    s = DissectionSettings(quantile=0.01, beam_limit=0, searches=("iou", "da-stop"), device="cuda", cache_mb=64)
    assert DissectionSettings.from_mapping(s.to_mapping()) == s
    assert set(s.protocol()) == {f.name for f in fields(DissectionSettings)} - set(SPEED_ONLY)
    default = DissectionSettings()
    assert DissectionSettings.from_mapping(s.protocol()) == replace(s, device="cpu", cache_mb=default.cache_mb)
    assert s.cache_bytes == 64 << 20


def test_from_mapping_reads_plain_values_and_names_the_problem():
    s = DissectionSettings.from_mapping({"searches": "iou, da-select", "quantile": 1 / 100, "max_length": 4})
    assert DissectionSettings.from_mapping({"cache_mb": 8, "quantile": 0.5}).quantile == 0.5
    assert (s.searches, s.quantile, s.max_length) == (("iou", "da-select"), 0.01, 4)
    with pytest.raises(InputError, match=r"\[settings\]: unknown key\(s\) beem_size"):
        DissectionSettings.from_mapping({"beem_size": 2}, "[settings]")
    with pytest.raises(InputError, match="beam_size must be int, got '5'"):
        DissectionSettings.from_mapping({"beam_size": "5"})
    with pytest.raises(InputError, match="beam_size must be int, got True"):
        DissectionSettings.from_mapping({"beam_size": True})
    with pytest.raises(InputError, match=r"saved: quantile must lie in \(0, 1\)"):
        DissectionSettings.from_mapping({"quantile": 2.0}, "saved")
    with pytest.raises(InputError, match="unknown search mode"):
        DissectionSettings.from_mapping({"searches": ["iou", "best"]})


def test_command_line_defaults_are_the_dataclass_defaults():
    args = build_parser().parse_args(["dissect", "--dataset", "d", "--activations", "a.npy", "--out", "o"])
    assert settings_from_args(args) == DissectionSettings()
    args = build_parser().parse_args(["dissect", "--dataset", "d", "--activations", "a.npy", "--out", "o",
                                      "--beam-limit", "0", "--search", "iou,da-stop", "--cache-mb", "8"])
    assert settings_from_args(args) == DissectionSettings(beam_limit=0, searches=("iou", "da-stop"), cache_mb=8)


def test_every_setting_has_a_documented_option():
    parser = build_parser()
    dissect = parser._subparsers._group_actions[0].choices["dissect"]
    by_dest = {a.dest: a for a in dissect._actions}
    for f in fields(DissectionSettings):
        action = by_dest[f.name]
        assert action.help and "default" in action.help
        assert action.default == (",".join(f.default) if f.name == "searches" else f.default)


def test_new_search_settings_from_every_front_end(tmp_path):
    """--beam-dedupe, --iou-scope and --search optimal on the command line, in a manifest's [settings], and checked."""
    from probescope.jobs.batch.manifest import read_manifest

    args = build_parser().parse_args(["dissect", "--dataset", "d", "--activations", "a.npy", "--out", "o",
                                      "--beam-dedupe", "none", "--iou-scope", "category", "--search", "iou,optimal"])
    expected = DissectionSettings(beam_dedupe="none", iou_scope="category", searches=("iou", "optimal"))
    assert settings_from_args(args) == expected
    manifest = tmp_path / "m.toml"
    manifest.write_text('[dataset]\npath = "d"\n[settings]\nbeam_dedupe = "none"\niou_scope = "category"\n'
                        'searches = ["iou", "optimal"]\n[[models]]\nactivations = "a.npy"\n')
    assert read_manifest(manifest).settings == expected
    with pytest.raises(InputError, match="unknown beam dedupe 'hash'"):
        DissectionSettings(beam_dedupe="hash")
    with pytest.raises(InputError, match="unknown IoU scope 'image'"):
        DissectionSettings.from_mapping({"iou_scope": "image"})
    help_text = build_parser()._subparsers._group_actions[0].choices["dissect"].format_help()
    assert "Mu & Andreas" in help_text and "NetDissect" in help_text

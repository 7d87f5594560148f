"""What ``plugins show`` says a part is when its plugin passed no ``description=``."""

from __future__ import annotations

from nectargan_core.registry import Registry


class Documented:
    """Sharpens edges.

    More text that is not the summary.
    """


def described(obj):
    registry = Registry()
    staged = []
    registry.registrar("loss_spec", "mine", "nectargan-mine", staged)("part", obj)
    return staged[0].description


def test_a_mapping_is_described_by_its_description_entry_never_by_dicts_docstring():
    assert described({"description": "pix2pix basic plus edges", "terms": {}}) == "pix2pix basic plus edges"
    assert described({"terms": {}}) == ""


def test_a_class_or_instance_is_described_by_the_first_line_of_its_docstring():
    assert described(Documented) == "Sharpens edges."
    assert described(Documented()) == "Sharpens edges."
    assert described([1, 2]) == ""

from dataclasses import dataclass, field

import pytest

from dcaccel.records import attributes, field_names


@dataclass(frozen=True)
class Run:
    name: str
    cycles: int
    steps: dict[int, int] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.cycles / 1e9


RUN = Run("conv", 2_000, {0: 3})


@pytest.mark.parametrize(
    ("without", "names"),
    [((), ("name", "cycles", "steps")), (["steps"], ("name", "cycles")), ({"name"}, ("cycles", "steps"))],
)
def test_field_names_in_declaration_order_but_those_left_out(without, names):
    assert field_names(RUN, without=without) == names


def test_attributes_shows_fields_and_properties_by_name_then_renamed_ones():
    view = attributes(RUN, ["cycles", "seconds"], label="name")
    assert view == {"cycles": 2_000, "seconds": 2e-6, "label": "conv"}
    assert list(view) == ["cycles", "seconds", "label"]


def test_attributes_of_an_unknown_name_raises():
    with pytest.raises(AttributeError, match="energy"):
        attributes(RUN, ["energy"])

"""``dcaccel map``: the table, the JSON object and errors."""

import json

import pytest

from dcaccel.cli import main
from dcaccel.mapping import parse


def test_json(capsys):
    status = main(["map", "conv-seed", "--arch", "eyeriss", "--objective", "energy", "--top-k", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    # the 4 placements of the first of at most 2 groups × 4 task tiles, the others once, 3 more placements
    assert 4 <= out["evaluations"] <= 4 + (2 * 4 - 1) + 3
    assert out["uncounted"] == {} and set(out["best"]) == {row["layer"] for row in out["layers"]}
    assert out["objective"] == pytest.approx(out["energy_pj"])
    assert out["space_size"] == out["layers"][0]["space_size"] > out["evaluations"]
    assert all(parse(text).pes == 16 for text in out["best"].values())


def test_table_and_errors(capsys):
    assert main(["map", "conv-seed", "--arch", "eyeriss", "--top-k", "1", "--pes", "4"]) == 0
    out = capsys.readouterr().out
    assert "Spatial(4, " in out and "over 1 nodes" in out and "mappings scheduled" in out
    assert main(["map", "conv-seed", "--arch", "abstract"]) == 2
    assert "no on-chip capacity" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["map", "conv-seed", "--objective", "area"])

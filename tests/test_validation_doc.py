"""docs/validation.md and ZigZag's committed numbers (``benchmarks/data/zigzag_<design>_<model>.json``,
written by ``benchmarks/validate_zigzag.py``): the reference table's ZigZag columns are the files'
totals, and every layer of the files obeys the counting rules the page writes down (latency as the
sum of its parts, energy as MACs plus word accesses at fixed costs per word, bytes from bits)."""

import importlib.util
import json
from pathlib import Path

import pytest

from tests.markdown import number, table

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "validate_zigzag.py"
DOC = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
REFERENCE = table(DOC, "## Reference numbers")

#: ``unit_energy`` (pJ per MAC) of ZigZag 3.9.1's shipped designs.
UNIT_ENERGY = {"tpu_like": 0.04, "eyeriss_like": 0.5}


def _benchmark():
    spec = importlib.util.spec_from_file_location("validate_zigzag", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCHMARK = _benchmark()
FILES = sorted(BENCHMARK.DATA.glob("zigzag_*_*.json"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_table_has_a_row_per_file():
    pairs = {(design, model) for design in BENCHMARK.DESIGNS for model in BENCHMARK.MODELS}
    files = {(zigzag["design"], zigzag["model"]) for zigzag in map(_load, FILES)}
    assert files <= pairs
    assert {(row["design"], row["model"]) for row in REFERENCE} == files


@pytest.mark.parametrize("row", REFERENCE, ids=lambda row: f"{row['model']}-{row['design']}")
def test_reference_table_is_the_files_totals(row):
    zigzag = _load(BENCHMARK.DATA / f"zigzag_{row['design']}_{row['model']}.json")
    total = BENCHMARK.summary(zigzag)[-1]
    assert number(row["layers"]) == len(zigzag["layers"])
    assert number(row["MACs"]) == total["macs"]
    assert number(row["ZigZag cycles"]) == round(total["cycles"])
    assert float(row["ZigZag energy µJ"]) == pytest.approx(total["energy_pj"] / 1e6, abs=0.0051)
    assert row["DRAM bytes W / I / O"] == " / ".join(f"{total[f'dram_{op}']:,}" for op in BENCHMARK.OPERANDS)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_layers_follow_the_counting_rules(path):
    zigzag = _load(path)
    assert zigzag["versions"]["zigzag-dse"] == BENCHMARK.ZIGZAG_VERSION
    assert zigzag["mapping_yaml"] == BENCHMARK.MAPPING_YAML
    read_costs, write_costs = {}, {}
    for layer in zigzag["layers"]:
        parts = ("ideal_temporal_cycles", "stall_slack_cycles", "onloading_cycles", "offloading_cycles")
        assert layer["cycles"] == sum(layer[part] for part in parts) + layer["systolic_drain_cycles"]
        assert layer["ideal_temporal_cycles"] >= layer["ideal_cycles"]
        assert layer["mac_energy_pj"] == pytest.approx(layer["macs"] * UNIT_ENERGY[zigzag["design"]])
        levels = [level for operand in layer["operands"].values() for level in operand["levels"]]
        assert layer["energy_pj"] == pytest.approx(layer["mac_energy_pj"] + sum(level["energy_pj"] for level in levels))
        for level in levels:
            accesses, energy = level["word_accesses"], level["energy_by_direction_pj"]
            for direction, costs in (("rd_out_to_low", read_costs), ("rd_out_to_high", read_costs)) + (
                ("wr_in_by_low", write_costs),
                ("wr_in_by_high", write_costs),
            ):
                if accesses[direction]:
                    cost = energy[direction] / accesses[direction]
                    assert costs.setdefault(level["memory"], cost) == pytest.approx(cost)
        top = {operand: entry["levels"][-1] for operand, entry in layer["operands"].items()}
        assert all(level["memory"] == "dram" for level in top.values())
        assert all(level["bits"]["wr_in_by_high"] == level["bits"]["rd_out_to_high"] == 0 for level in top.values())
        dram = BENCHMARK.dram_bytes(layer)
        assert dram["W"] == top["W"]["bits"]["rd_out_to_low"] // 8

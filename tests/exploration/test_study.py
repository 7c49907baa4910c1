"""dcaccel.Study: one validated description of an exploration, read from and written to YAML, that
``explore()`` builds from its arguments and runs; a result file records the study that wrote it."""

from pathlib import Path

import numpy as np
import pytest
import yaml

import dcaccel
from dcaccel.architecture import load as load_architecture
from dcaccel.errors import DcaccelError
from dcaccel.exploration.points import columns
from dcaccel.exploration.store import read_points, read_study
from dcaccel.exploration.study import PARTS, Study

TIMING = [name for name in columns() if name.endswith("_seconds")]


def test_a_study_that_sets_nothing_has_explores_defaults():
    study = Study(models=["conv-seed"])
    assert study.pes is None  # the designs' units, else 1…128, when the study runs (tests/exploration/test_defaults)
    assert study.scheduler == ("streaming", "list") and study.onchip_memory == (0,)
    assert (study.strategy, study.objective, study.max_assignments) == ("per-op-type", "makespan", 4096)
    assert study.arch == ("abstract",) and study.arch_params is None and study.implementations is None
    assert (study.dag.granularity, study.dag.edge_volume, study.dag.compose, study.dag.strict) == (
        "task",
        "exact",
        True,
        False,
    )
    assert study.partition.policies == ("none",) and study.partition.min_nodes == 2
    assert (study.execution.executor, study.execution.workers, study.store.results) == ("local", None, None)


@pytest.mark.parametrize(
    "fields",
    [
        {"models": "conv-seed"},
        {"models": ["lenet", "conv-seed"], "implementations": {"Conv": ["mv", "lmv"]}, "pes": [16, 128]},
        {"models": "lenet", "granularity": ("tiles", 4), "edge_volume": "reference", "executor": "process"},
        {"models": "lenet", "scheduler": "heft", "partition_policy": ["greedy", "cost"], "arch": ["cgra"]},
        {"models": "lenet", "arch": ["eyeriss"], "arch_params": {"units.pe.count": [16, 64]}, "symbols": {"n": 2}},
        {"models": "conv-seed", "strategy": "mapping", "objective": "edp", "arch": "eyeriss"},
    ],
)
def test_yaml_reads_back_the_same_study(fields):
    study = Study.of(**fields)
    text = study.to_yaml()
    assert Study.from_yaml(text) == study
    assert Study.from_yaml(text).to_yaml() == text


def test_an_architecture_object_is_written_as_its_description():
    tpu = load_architecture("tpu").replace(clock_mhz=500)
    study = Study.from_yaml(Study.of(models="conv-seed", arch=[tpu]).to_yaml())
    (written,) = study.arch
    assert written == tpu.to_dict() and written["clock_mhz"] == 500


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models: [lenet]\nexecution: {workerz: 2}\n", "study s.yaml: execution.workerz: not a field of the study"),
        ("models: [lenet]\nspeed: 3\n", "study s.yaml: speed: not a field of the study"),
        ("models: []\n", "study s.yaml: models is empty"),
        ("pes: [4]\n", "study s.yaml: models: Field required"),
        ("models: [lenet]\npes: [0]\n", "study s.yaml: pes must be integers of at least 1, got 0"),
        ("models: [lenet]\nscheduler: [fifo]\n", "study s.yaml: unknown scheduler 'fifo' (expected one of stream"),
        ("models: [lenet]\nexecution: {workers: 0}\n", "study s.yaml: workers must be positive, got 0"),
        ("models: [lenet]\nexecution: {address: tcp://h:1}\n", "address 'tcp://h:1' needs executor 'dask'"),
        ("models: [lenet]\ndag: {edge_volume: rough}\n", "study s.yaml: unknown edge volume 'rough'"),
        ("models: [lenet]\npartition: {min_work_share: 2}\n", "min_work_share must be between 0 and 1, got 2"),
        ("models: [lenet]\ncost_model: {pe_area: big}\n", "study s.yaml: cost_model.pe_area: Input should be a valid"),
        (
            "models: [lenet]\nstrategy: mapping\nobjective: work\n",
            "the mapping strategy's objective is one of makespan, energy, edp",
        ),
        (
            "models: [lenet]\nobjective: area_mm\n",
            "objective 'area_mm' is neither makespan, energy nor a numeric column of the results",
        ),
        (
            "models: [lenet]\npes: 010\n",
            "study s.yaml: line 2: not valid YAML (010 is read differently by YAML 1.1 and 1.2",
        ),
        ("models: [lenet]\nmodels: [mmm]\n", "study s.yaml: line 2: not valid YAML (key models appears twice"),
        ("- lenet\n", "study s.yaml: expected a mapping of the study's fields, got list"),
        ("models: !!python/name:os.system\n", "study s.yaml: line 1: not valid YAML"),
    ],
)
def test_a_bad_study_is_one_line_naming_the_field(text, message):
    with pytest.raises(DcaccelError) as raised:
        Study.from_yaml(text, "s.yaml")
    assert message in str(raised.value) and len(str(raised.value).splitlines()) == 1


def test_the_docs_study_file_is_complete_and_valid():
    """docs/study.md's study sets every field of the study and of its parts, and reads back as written."""
    import re

    docs = Path(__file__).parents[2] / "docs" / "study.md"
    (text,) = re.findall(r"```yaml\n(.*?)```", docs.read_text(), re.S)
    study = Study.from_yaml(text, "docs/study.md")
    written = yaml.safe_load(text)
    assert set(written) == set(Study.model_fields)
    assert all(set(written[part]) == set(model.model_fields) for part, model in PARTS.items())
    assert (study.models, study.strategy, study.execution.executor, study.store.results) == (
        ("lenet",),
        "per-node",
        "process",
        "lenet.sqlite",
    )
    assert Study.from_yaml(study.to_yaml()) == study


def test_a_study_file_is_read_within_bounds(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("models: [conv-seed]\npes: [16]\n")
    assert Study.load(path).pes == (16,)
    with pytest.raises(DcaccelError, match="study file .*missing.yaml does not exist"):
        Study.load(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workerz": 2}, "explore: unknown option 'workerz' (not a field of dcaccel.Study)"),
        ({"models": ["lenet"], "pes": []}, "explore: pes is empty"),
    ],
)
def test_explore_refuses_an_unknown_option_naming_it(options, message, monkeypatch):
    from dcaccel.exploration import sweep

    monkeypatch.setattr(sweep, "run_study", lambda *args: pytest.fail("the study ran"))
    with pytest.raises(DcaccelError) as raised:
        dcaccel.explore("conv-seed", **options)
    assert str(raised.value) == message


def test_explore_builds_the_study_of_its_arguments(monkeypatch):
    from dcaccel.exploration import sweep

    ran = []
    monkeypatch.setattr(sweep, "run_study", lambda study, loaded, progress: ran.append((study, loaded, progress)))
    dcaccel.explore("lenet", {"Conv": ["mv"]}, [16], executor="process", workers=2, results="r.db", progress=False)
    dcaccel.explore(study=Study.of(models="mmm", pes=[4]), scheduler="list")
    (first, loaded, progress), (second, _, _) = ran
    assert first == Study.of(
        models="lenet", implementations={"Conv": ["mv"]}, pes=[16], executor="process", workers=2, results="r.db"
    )
    assert loaded is None and progress is False
    assert (second.models, second.pes, second.scheduler) == (("mmm",), (4,), ("list",))


def _matmul_onnx(path: Path) -> None:
    """An ONNX model Y = X @ W, X 8 × 6, W 6 × 4 of ones."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((6, 4), dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul")],
        "matmul",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, 6])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, 4])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@pytest.mark.slow
def test_explore_takes_a_model_path_as_the_cli_does(tmp_path):
    path = tmp_path / "matmul.onnx"
    _matmul_onnx(path)
    by_path = dcaccel.explore(str(path), {"MatMul": ["mv", "lmv"]}, pes=[2], scheduler="list", progress=False)
    loaded = dcaccel.load(str(path))
    by_object = dcaccel.explore(loaded, {"MatMul": ["mv", "lmv"]}, pes=[2], scheduler="list", progress=False)
    assert list(by_path["assignment"]) == ["MatMul=mv", "MatMul=lmv"]
    assert by_path.drop(columns=TIMING).equals(by_object.drop(columns=TIMING))


@pytest.mark.slow
def test_a_result_file_records_its_study(tmp_path):
    path = tmp_path / "r.sqlite"
    options = {"implementations": {"Conv": ["mv", "lmv"]}, "pes": [16], "scheduler": "list", "results": str(path)}
    frame = dcaccel.explore("conv-seed", progress=False, **options)
    recorded = Study.from_yaml(read_study(path))
    assert recorded == Study.of(models="conv-seed", **options)
    assert read_points(path)["assignment"].tolist() == sorted(frame["assignment"])
    resumed = dcaccel.explore(study=recorded.replace(resume=True), progress=False)
    assert resumed.drop(columns=TIMING).equals(frame.drop(columns=TIMING))
    assert Study.from_yaml(read_study(path)).store.resume is True


def test_a_file_without_a_study_says_so(tmp_path):
    from dcaccel.exploration.store import ResultStore

    path = tmp_path / "r.sqlite"
    ResultStore(path, {}).close()
    with pytest.raises(DcaccelError, match=r"r\.sqlite: no study recorded"):
        read_study(path)

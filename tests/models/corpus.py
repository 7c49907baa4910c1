"""A corpus of real architectures: Hugging Face ``transformers`` models built from small configs (CNNs, vision
and text encoders, Swin's windowed attention, DeBERTa's disentangled attention, decoders with a causal mask, Llama's
rotary embeddings among them, T5's encoder-decoder, wav2vec 2.0's audio front-end of Conv1d and GroupNorm),
recurrent classifiers, the zoo-style ONNX models of ``tests/frontend/zoo.py`` at opsets 9, 11 and 13, and a
VGG-style CNN with batch norm as an opset-6 exporter wrote it.

Every ``transformers`` model is built from its config with random weights (seeded), never downloaded,
in inference mode, and wrapped so that ``forward`` returns one tensor (the logits of an image
classifier, the last hidden state of a text model), which keeps the ONNX export to a single output.
Sizes are tiny (two stages or layers, 16-64 channels or hidden units, 32×32 or 64×64 images, 16
tokens) so that a model goes from import to schedule in seconds. The zoo-style models are reused as
their builders write them (``zoo.MODELS``), one corpus entry per opset.

``build(name)`` returns ``(model, example_inputs)`` for :func:`dcaccel.load` (a ``torch.nn.Module``
and its input, or an ``onnx.ModelProto`` and None); ``MODELS`` lists the models with their family
(:class:`Family`), which says what the corpus promises about them: every family but the decoders lowers
with zero opaque tasks, decoders (causal masks, position arithmetic) may keep some.
``transformers`` is a test dependency (the ``dev`` extra), imported only when a model is built.

``run_pipeline(workload, shape)`` takes an imported model through the rest of the pipeline with every
matrix product (Conv, Gemm, MatMul) lowered as the MMM shape ``shape``: lower, extract the task DAG
(validated), schedule on :data:`PES` PEs, timing each stage (wall time) and the whole (CPU time of the process, which
other processes on a shared machine do not inflate). The tests and
``benchmarks/model_coverage.py`` share it.
"""

import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import onnx
import torch

from tests.frontend import zoo

#: Seed of the random weights and example inputs.
SEED = 0
#: Side of the example images of the CNNs (ViT and DeiT use 32×32).
IMAGE_SIZE = 64
#: Number of tokens of the example inputs of the text models.
TOKENS = 16
#: Vocabulary size of the text models.
VOCABULARY = 128
#: The MMM shapes every model is lowered under.
MMM_SHAPES = ("mv", "op", "lmv")
#: Processing elements of the schedule.
PES = 16


class Family(StrEnum):
    """What a model of the corpus is, which decides what the corpus asserts about its lowering."""

    CNN = "cnn"
    ENCODER = "encoder"  # transformer encoder (vision or text)
    DECODER = "decoder"  # causal transformer decoder
    ENCODER_DECODER = "encoder-decoder"  # transformer encoder and decoder with cross-attention
    AUDIO = "audio"  # audio front-end (Conv1d feature extractor, GroupNorm) and transformer encoder
    RECURRENT = "recurrent"  # recurrent classifier (LSTM, GRU)


class SingleOutput(torch.nn.Module):
    """``model`` with ``forward`` returning only the output field ``field`` (e.g. ``logits``).

    With ``attention_mask``, the model also gets an all-ones attention mask (GPT-2: without one,
    ``transformers`` looks for packed sequences with ``torch.diff``, which the ONNX export lacks). With
    ``decoder_inputs``, an encoder-decoder gets the same tokens as its decoder's input.
    """

    def __init__(self, model: torch.nn.Module, field: str, attention_mask: bool = False, decoder_inputs: bool = False):
        super().__init__()
        self.model = model
        self.field = field
        self.attention_mask = attention_mask
        self.decoder_inputs = decoder_inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keywords = {}
        if self.attention_mask:
            keywords["attention_mask"] = torch.ones_like(x)
        if self.decoder_inputs:
            keywords["decoder_input_ids"] = x
        return getattr(self.model(x, **keywords), self.field)


@dataclass(frozen=True)
class CorpusModel:
    """One model of the corpus: its family, where it comes from and the function building it."""

    name: str
    family: Family
    source: str  # "transformers" or "zoo, opset N"
    build: Callable[[], tuple[torch.nn.Module | onnx.ModelProto, torch.Tensor | None]]


def _transformers(
    name: str,
    family: Family,
    factory: Callable[[], torch.nn.Module],
    example: Callable[[torch.Generator], torch.Tensor],
) -> CorpusModel:
    """A ``transformers`` model: ``factory`` builds the wrapped module, ``example`` draws its input."""

    def build() -> tuple[torch.nn.Module, torch.Tensor]:
        os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing is downloaded
        torch.manual_seed(SEED)
        module = factory().eval()
        return module, example(torch.Generator().manual_seed(SEED))

    return CorpusModel(name, family, "transformers", build)


def _zoo(model: zoo.ZooModel, opset: int) -> CorpusModel:
    """A zoo-style ONNX model of ``tests/frontend/zoo.py`` at ``opset``."""
    return CorpusModel(
        f"{model.name}-opset{opset}", Family.CNN, f"zoo, opset {opset}", lambda: (model.build(opset), None)
    )


#: The opset of the classic CNN written as the oldest exporters wrote it.
OLD_OPSET = 6


def _vgg_bn(opset: int = OLD_OPSET) -> onnx.ModelProto:
    """A VGG-style CNN with batch norm as an opset-6 exporter wrote it: three Conv, BatchNormalization (with
    ``is_test``, ``spatial``, ``epsilon`` and ``momentum`` attributes), Relu and MaxPool stages, Flatten, Gemm
    and Softmax. Input (1, 3, 32, 32), output (1, 10)."""
    g = zoo._Graph(opset, seed=6)
    data = onnx.helper.make_tensor_value_info("data_0", onnx.TensorProto.FLOAT, [1, 3, 32, 32])
    x, channels = "data_0", 3
    for width in (8, 16, 32):
        x = g.node("Conv", [x, g.random(width, channels, 3, 3, as_input=True)], pads=[1] * 4)
        scale, shift = g.random(width, as_input=True), g.random(width, as_input=True)
        mean = g.initializer(g.rng.standard_normal(width).astype("float32") * 0.1, as_input=True)
        variance = g.initializer(g.rng.uniform(0.5, 1.5, width).astype("float32"), as_input=True)
        attributes = {"is_test": 1, "spatial": 1} if opset < 7 else {"spatial": 1} if opset < 9 else {}
        x = g.node("BatchNormalization", [x, scale, shift, mean, variance], epsilon=1e-3, momentum=0.9, **attributes)
        x = g.node("MaxPool", [g.node("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
        channels = width
    x = g.node("Flatten", [x], axis=1)  # (1, 32 * 4 * 4)
    x = g.node("Gemm", [x, g.random(10, 512, as_input=True), g.random(10, as_input=True)], transB=1)
    return g.model("vgg-bn", data, g.node("Softmax", [x], axis=1), classes=10)


def _image(channels: int = 3, size: int = IMAGE_SIZE) -> Callable[[torch.Generator], torch.Tensor]:
    return lambda generator: torch.randn(1, channels, size, size, generator=generator)


def _tokens(generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, VOCABULARY, (1, TOKENS), generator=generator)


def _resnet() -> torch.nn.Module:
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10)
    return SingleOutput(ResNetForImageClassification(config), "logits")


def _mobilenet_v2() -> torch.nn.Module:
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    config = MobileNetV2Config(depth_multiplier=0.25, image_size=IMAGE_SIZE, num_labels=10)
    return SingleOutput(MobileNetV2ForImageClassification(config), "logits")


def _convnext() -> torch.nn.Module:
    from transformers import ConvNextConfig, ConvNextForImageClassification

    config = ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=10)
    return SingleOutput(ConvNextForImageClassification(config), "logits")


def _efficientnet() -> torch.nn.Module:
    from transformers import EfficientNetConfig, EfficientNetForImageClassification

    config = EfficientNetConfig(
        image_size=IMAGE_SIZE,
        width_coefficient=0.25,
        depth_coefficient=0.25,
        hidden_dim=320,  # the channels of the top convolution: 1280 · width_coefficient
        num_labels=10,
    )
    return SingleOutput(EfficientNetForImageClassification(config), "logits")


def _regnet() -> torch.nn.Module:
    from transformers import RegNetConfig, RegNetForImageClassification

    config = RegNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8, num_labels=10)
    return SingleOutput(RegNetForImageClassification(config), "logits")


#: ViT and DeiT at the corpus's size: two layers of width 32 over 32×32 images in 16×16 patches.
TINY_VISION_TRANSFORMER = {
    "image_size": 32,
    "patch_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_labels": 10,
    "attn_implementation": "eager",
}


def _vit() -> torch.nn.Module:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(**TINY_VISION_TRANSFORMER)
    return SingleOutput(ViTForImageClassification(config), "logits")


def _deit() -> torch.nn.Module:
    from transformers import DeiTConfig, DeiTForImageClassification

    config = DeiTConfig(**TINY_VISION_TRANSFORMER)
    return SingleOutput(DeiTForImageClassification(config), "logits")


#: The sizes of the text transformers whose configs name them as BERT's does (BERT, Llama, DeBERTa-v2).
TINY_TEXT_TRANSFORMER = {
    "vocab_size": VOCABULARY,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": TOKENS,
    "attn_implementation": "eager",
}
#: T5's sizes (its own names), the encoder's layers.
TINY_T5 = {
    "vocab_size": VOCABULARY,
    "d_model": 32,
    "d_kv": 16,
    "d_ff": 64,
    "num_layers": 2,
    "num_heads": 2,
    "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": TOKENS,
}


def _bert() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(**TINY_TEXT_TRANSFORMER)
    return SingleOutput(BertModel(config, add_pooling_layer=False), "last_hidden_state")


def _distilbert() -> torch.nn.Module:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(
        vocab_size=VOCABULARY,
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=TOKENS,
        attn_implementation="eager",
    )
    return SingleOutput(DistilBertModel(config), "last_hidden_state")


def _gpt2() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        vocab_size=VOCABULARY,
        n_positions=TOKENS,
        n_embd=32,
        n_layer=2,
        n_head=2,
        use_cache=False,
        attn_implementation="eager",
    )
    return SingleOutput(GPT2Model(config), "last_hidden_state", attention_mask=True)


def _llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(**TINY_TEXT_TRANSFORMER, num_key_value_heads=1, use_cache=False)
    return SingleOutput(LlamaModel(config), "last_hidden_state", attention_mask=True)


def _t5() -> torch.nn.Module:
    from transformers import T5Config, T5Model

    config = T5Config(**TINY_T5, num_decoder_layers=2, use_cache=False, attn_implementation="eager")
    return SingleOutput(T5Model(config), "last_hidden_state", decoder_inputs=True)


def _swin() -> torch.nn.Module:
    from transformers import SwinConfig, SwinForImageClassification

    config = SwinConfig(
        image_size=32,
        patch_size=4,
        embed_dim=16,
        depths=[2, 1],
        num_heads=[2, 2],
        window_size=4,
        num_labels=10,
        attn_implementation="eager",
    )
    return SingleOutput(SwinForImageClassification(config), "logits")


def _deberta() -> torch.nn.Module:
    from transformers import DebertaV2Config, DebertaV2Model

    config = DebertaV2Config(
        **TINY_TEXT_TRANSFORMER,
        relative_attention=True,
        position_buckets=8,
        max_relative_positions=TOKENS,
        pos_att_type=["p2c", "c2p"],
    )
    return SingleOutput(DebertaV2Model(config), "last_hidden_state")


#: Samples of the audio models' example waveform.
SAMPLES = 400


def _wav2vec2() -> torch.nn.Module:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16, 16),
        conv_kernel=(10, 3, 3),
        conv_stride=(5, 2, 2),
        feat_extract_norm="group",
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        apply_spec_augment=False,
        attn_implementation="eager",
    )
    return SingleOutput(Wav2Vec2Model(config), "last_hidden_state")


def _waveform(generator: torch.Generator) -> torch.Tensor:
    return torch.randn(1, SAMPLES, generator=generator)


#: The recurrent classifiers' sequence length, batch and features per step.
SEQUENCE = (6, 1, 8)


class RecurrentClassifier(torch.nn.Module):
    """A recurrent layer ``cell`` (``torch.nn.LSTM`` or ``GRU``, 16 hidden units) over a sequence of
    :data:`SEQUENCE`, then a linear classifier of its last step's output into 4 classes."""

    def __init__(self, cell: type, bidirectional: bool = False):
        super().__init__()
        self.recurrent = cell(SEQUENCE[2], 16, bidirectional=bidirectional)
        self.head = torch.nn.Linear(16 * (1 + bidirectional), 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.recurrent(x)
        return self.head(y[-1])


def _recurrent(name: str, cell: type, bidirectional: bool) -> CorpusModel:
    """A :class:`RecurrentClassifier` exported by torch (the GRU with ``linear_before_reset``, as torch's)."""

    def build() -> tuple[torch.nn.Module, torch.Tensor]:
        torch.manual_seed(SEED)
        module = RecurrentClassifier(cell, bidirectional).eval()
        return module, torch.randn(*SEQUENCE, generator=torch.Generator().manual_seed(SEED))

    return CorpusModel(name, Family.RECURRENT, "torch", build)


MODELS: dict[str, CorpusModel] = {
    model.name: model
    for model in (
        _transformers("resnet", Family.CNN, _resnet, _image()),
        _transformers("mobilenet-v2", Family.CNN, _mobilenet_v2, _image()),
        _transformers("convnext", Family.CNN, _convnext, _image()),
        _transformers("efficientnet", Family.CNN, _efficientnet, _image()),
        _transformers("regnet", Family.CNN, _regnet, _image()),
        _transformers("vit", Family.ENCODER, _vit, _image(size=32)),
        _transformers("deit", Family.ENCODER, _deit, _image(size=32)),
        _transformers("bert", Family.ENCODER, _bert, _tokens),
        _transformers("distilbert", Family.ENCODER, _distilbert, _tokens),
        _transformers("gpt2", Family.DECODER, _gpt2, _tokens),
        _transformers("llama", Family.DECODER, _llama, _tokens),
        _transformers("t5", Family.ENCODER_DECODER, _t5, _tokens),
        _transformers("swin", Family.ENCODER, _swin, _image(size=32)),
        _transformers("deberta-v2", Family.ENCODER, _deberta, _tokens),
        _transformers("wav2vec2", Family.AUDIO, _wav2vec2, _waveform),
        _recurrent("lstm-classifier", torch.nn.LSTM, bidirectional=False),
        _recurrent("gru-classifier", torch.nn.GRU, bidirectional=True),
        *(_zoo(model, opset) for model in zoo.MODELS for opset in zoo.OPSETS),
        CorpusModel(f"vgg-bn-opset{OLD_OPSET}", Family.CNN, f"zoo-style, opset {OLD_OPSET}", lambda: (_vgg_bn(), None)),
    )
}
"""The models of the corpus by name, in the order of the coverage table."""


def names() -> list[str]:
    """The names of the corpus' models."""
    return list(MODELS)


def build(name: str) -> tuple[torch.nn.Module | onnx.ModelProto, torch.Tensor | None]:
    """The model ``name`` (random weights from :data:`SEED`, inference mode) and its example input (None
    for an ONNX model)."""
    if name not in MODELS:
        raise KeyError(f"no model '{name}' in the corpus (models: {', '.join(MODELS)})")
    return MODELS[name].build()


def load(name: str):
    """The model ``name`` imported by :func:`dcaccel.load` (a ``Workload`` named ``name``)."""
    import dcaccel

    return dcaccel.load(*build(name), name=name)


def shape_choices(workload, shape: str) -> dict[str, str]:
    """Implementation choices lowering every op type of ``workload`` that has the MMM shape ``shape``
    (Conv, Gemm, MatMul) with it; the other ops keep their defaults."""
    from dcaccel.exploration.load import default_implementations

    return {op: shape for op, available in default_implementations(workload).items() if shape in available}


@dataclass
class PipelineRun:
    """One model lowered under one MMM shape: the products of each stage and the seconds it took."""

    shape: str
    choices: dict[str, str]
    lowered: Any  # LoweredWorkload
    dag: Any  # TaskDAG (validated)
    schedule: Any  # Schedule on PES PEs
    seconds: dict[str, float]  # stage ("lower", "extract", "schedule") -> wall time
    cpu_seconds: float  # CPU time of this process over the three stages (not inflated by other processes)

    @property
    def opaque_tasks(self) -> int:
        """Tasks of the DAG that stand for a whole op without a canonical lowering (role opaque)."""
        from dcaccel.dag.metrics import opaque_work

        return opaque_work(self.dag)[0]

    @property
    def canonical_tasks(self) -> int:
        """Tasks of the DAG that come from canonical (map-based) lowerings."""
        return len(self.dag.tasks) - self.opaque_tasks


def run_pipeline(workload, shape: str, pes: int = PES) -> PipelineRun:
    """Lower ``workload`` with its matrix products as ``shape``, extract and validate its task DAG and
    schedule it on ``pes`` PEs (streaming scheduler); raises whatever the first failing stage raises."""
    import dcaccel
    from dcaccel.dag.extract import extract

    choices = shape_choices(workload, shape)
    seconds = {}
    cpu_start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inserted buffers and tile warnings: expected on real models
        start = time.perf_counter()
        lowered = workload.lower(choices)
        seconds["lower"] = time.perf_counter() - start
        start = time.perf_counter()
        dag = extract(lowered)
        dag.validate()
        seconds["extract"] = time.perf_counter() - start
    start = time.perf_counter()
    schedule = dcaccel.schedule(dag, pes)
    seconds["schedule"] = time.perf_counter() - start
    return PipelineRun(shape, choices, lowered, dag, schedule, seconds, time.process_time() - cpu_start)

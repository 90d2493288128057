"""Generate the per-layer gradient size profiles (gradswitch/workload/models/*.json) from the architectures.

Each profile lists the model's parameter tensors in forward order, as PyTorch's
`named_parameters()` would (conv/linear weight and bias, batch-norm weight and bias,
layer-norm weight and bias, embeddings), with their element counts; the totals match
the published parameter counts (checked by tests/unit/test_workloads.py).

Each profile also carries its computation (gradswitch/workload/compute.py, docs/training.md): the forward
FLOPs of every module for one sample (2 FLOPs per multiply-accumulate; convolutions: output
height x width x input channels x output channels x kernel area; linear layers: inputs x
outputs per token; attention: the QK^T and AV products; normalisation NORM_FLOPS per
activation), and per device and precision the efficiency that makes the modelled single-GPU
iteration match a published training throughput, with its source. Run:

    python -m gradswitch.workload.models.generate
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from gradswitch.workload.compute import MODEL_FORMAT, Calibration, efficiency, train_flops
from gradswitch.workload.job import Device, Precision

HERE = Path(__file__).parent
Layer = tuple[str, int, str]  # (name, elements, kind: conv | fc | norm | embedding)


def conv(name: str, cin: int, cout: int, k: int, bias: bool) -> list[Layer]:
    out = [(f"{name}.weight", cin * cout * k * k, "conv")]
    if bias:
        out.append((f"{name}.bias", cout, "conv"))
    return out


def norm(name: str, c: int) -> list[Layer]:
    return [(f"{name}.weight", c, "norm"), (f"{name}.bias", c, "norm")]


def linear(name: str, fin: int, fout: int, kind: str = "fc") -> list[Layer]:
    return [(f"{name}.weight", fin * fout, kind), (f"{name}.bias", fout, kind)]


NORM_FLOPS = 8  # batch/layer normalisation in training: mean, variance, normalise, scale and shift per activation
Flops = dict[str, float]  # module name -> forward FLOPs per sample


def conv_flops(out_hw: int, cin: int, cout: int, k: int, bias: bool) -> float:
    return 2.0 * out_hw * out_hw * cin * cout * k * k + (out_hw * out_hw * cout if bias else 0)


def linear_flops(tokens: int, fin: int, fout: int) -> float:
    return 2.0 * tokens * fin * fout + tokens * fout


def resnet50_flops(image: int = 224) -> Flops:
    """torchvision resnet50 (v1.5: the stride on the 3x3 convolution) on image x image inputs."""
    hw = image // 2
    f: Flops = {"conv1": conv_flops(hw, 3, 64, 7, False), "bn1": NORM_FLOPS * hw * hw * 64}
    hw //= 2  # max pool
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            out = hw // 2 if (b == 0 and stage > 1) else hw
            f[f"{p}.conv1"] = conv_flops(hw, cin, width, 1, False)
            f[f"{p}.bn1"] = NORM_FLOPS * hw * hw * width
            f[f"{p}.conv2"] = conv_flops(out, width, width, 3, False)
            f[f"{p}.bn2"] = NORM_FLOPS * out * out * width
            f[f"{p}.conv3"] = conv_flops(out, width, width * 4, 1, False)
            f[f"{p}.bn3"] = NORM_FLOPS * out * out * width * 4
            if b == 0:
                f[f"{p}.downsample.0"] = conv_flops(out, cin, width * 4, 1, False)
                f[f"{p}.downsample.1"] = NORM_FLOPS * out * out * width * 4
            hw, cin = out, width * 4
    f["fc"] = linear_flops(1, 2048, 1000)
    return f


VGG16_CONVS = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16_flops(image: int = 224) -> Flops:
    f: Flops = {}
    cin, hw, index = 3, image, 0
    for cout in VGG16_CONVS:
        if cout == "M":
            hw //= 2
            index += 1
            continue
        assert isinstance(cout, int)
        f[f"features.{index}"] = conv_flops(hw, cin, cout, 3, True)
        cin = cout
        index += 2
    f["classifier.0"] = linear_flops(1, 512 * 7 * 7, 4096)
    f["classifier.3"] = linear_flops(1, 4096, 4096)
    f["classifier.6"] = linear_flops(1, 4096, 1000)
    return f


BERT_SEQUENCE = 128  # tokens per sample of the profile (BERT pre-training phase 1)
BERT_PREDICTIONS = 20  # masked tokens per sequence the MLM head predicts (phase 1's max_predictions_per_seq)


def bert_flops(hidden: int = 768, layers: int = 12, ff: int = 3072, vocab: int = 30522, seq: int = BERT_SEQUENCE,
               predictions: int = BERT_PREDICTIONS) -> Flops:
    """One sequence through BERT (embeddings, encoder layers, pooler). The masked-LM head's decoder
    shares the word embeddings' weights, so its FLOPs (on the masked positions only) are the word
    embeddings' module's: that is where its gradient goes. The attention products (QK^T, AV) and the
    softmax are counted with the value projection, the last of the three."""
    f: Flops = {"embeddings.word_embeddings": linear_flops(predictions, hidden, vocab),
                "embeddings.position_embeddings": 0.0, "embeddings.token_type_embeddings": 0.0,
                "embeddings.LayerNorm": NORM_FLOPS * seq * hidden}
    for i in range(layers):
        p = f"encoder.layer.{i}"
        for part in ("query", "key", "value"):
            f[f"{p}.attention.self.{part}"] = linear_flops(seq, hidden, hidden)
        f[f"{p}.attention.self.value"] += 2.0 * 2 * seq * seq * hidden + 5.0 * seq * seq * (hidden // 64)
        f[f"{p}.attention.output.dense"] = linear_flops(seq, hidden, hidden)
        f[f"{p}.attention.output.LayerNorm"] = NORM_FLOPS * seq * hidden
        f[f"{p}.intermediate.dense"] = linear_flops(seq, hidden, ff)
        f[f"{p}.output.dense"] = linear_flops(seq, ff, hidden)
        f[f"{p}.output.LayerNorm"] = NORM_FLOPS * seq * hidden
    f["pooler.dense"] = linear_flops(1, hidden, hidden)
    return f


def small_cnn_flops() -> Flops:
    return {"conv1": conv_flops(24, 1, 6, 5, True), "conv2": conv_flops(8, 6, 16, 5, True),
            "fc1": linear_flops(1, 400, 120), "fc2": linear_flops(1, 120, 84), "fc3": linear_flops(1, 84, 10)}


# Published single-GPU training throughputs. NVIDIA's "FP32" on A100 is TF32 (the default there).
RESNET50_SOURCE = ("https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/"
                   "resnet50v1.5/README.md (Training performance, 1 GPU, pytorch-21.03; batch sizes from "
                   "PyTorch/Classification/ConvNets/configs.yml)")
BERT_A100_SOURCE = ("https://github.com/NVIDIA/DeepLearningExamples/blob/master/TensorFlow2/LanguageModeling/BERT/"
                    "README.md (Pre-training training performance: single-node on DGX A100 80GB, 1 GPU, "
                    "sequence length 128, BERT-large)")
BERT_V100_SOURCE = ("https://github.com/NVIDIA/DeepLearningExamples/blob/master/TensorFlow2/LanguageModeling/BERT/"
                    "README.md (Fine-tuning training performance for SQuAD v1.1 on DGX-1 V100 16GB, 1 GPU, "
                    "sequence length 384, BERT-large)")
# (device, precision, batch, samples/s, measured model, source)
Measurement = tuple[Device, Precision, int, float, str, str]
RESNET50_MEASURED: list[Measurement] = [
    (Device.V100, Precision.FP32, 112, 367.0, "resnet50", RESNET50_SOURCE),
    (Device.V100, Precision.AMP, 256, 1200.0, "resnet50", RESNET50_SOURCE),
    (Device.A100, Precision.FP32, 256, 938.0, "resnet50", RESNET50_SOURCE),
    (Device.A100, Precision.AMP, 256, 2470.0, "resnet50", RESNET50_SOURCE),
]
BERT_MEASURED: list[Measurement] = [
    (Device.V100, Precision.FP32, 3, 9.85, "bert-large-seq384", BERT_V100_SOURCE),
    (Device.V100, Precision.AMP, 6, 39.10, "bert-large-seq384", BERT_V100_SOURCE),
    (Device.A100, Precision.FP32, 176, 282.98, "bert-large-seq128", BERT_A100_SOURCE),
    (Device.A100, Precision.AMP, 312, 485.59, "bert-large-seq128", BERT_A100_SOURCE),
]
MEASURED_FLOPS: dict[str, Flops] = {  # the measured models' modules, counted by the same rules
    "resnet50": resnet50_flops(),
    "bert-large-seq128": bert_flops(1024, 24, 4096),
    "bert-large-seq384": bert_flops(1024, 24, 4096, seq=384, predictions=0),
}
BORROWED = {
    "vgg16": "no single-GPU VGG-16 training throughput was found in the sources searched: the efficiency measured "
             "on ResNet-50 (same device, precision and cuDNN convolutions) is used",
    "bert-base": "no single-GPU BERT-base training throughput was found in the sources searched: the efficiency "
                 "measured on BERT-large (the same layers, wider) is used",
}


def calibrations(model: str, measured: list[Measurement]) -> list[Calibration]:
    out = []
    for device, precision, batch, rate, measured_model, source in measured:
        flops = train_flops(list(MEASURED_FLOPS[measured_model].values()))
        out.append(Calibration(device, precision, batch, rate, measured_model,
                               round(efficiency(flops, rate, device, precision), 4), source, BORROWED.get(model, "")))
    return out


def resnet50() -> list[Layer]:
    """He et al. 2016, torchvision resnet50 (25,557,032 parameters)."""
    layers = conv("conv1", 3, 64, 7, False) + norm("bn1", 64)
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            layers += conv(f"{p}.conv1", cin, width, 1, False) + norm(f"{p}.bn1", width)
            layers += conv(f"{p}.conv2", width, width, 3, False) + norm(f"{p}.bn2", width)
            layers += conv(f"{p}.conv3", width, width * 4, 1, False) + norm(f"{p}.bn3", width * 4)
            if b == 0:
                layers += conv(f"{p}.downsample.0", cin, width * 4, 1, False) + norm(f"{p}.downsample.1", width * 4)
            cin = width * 4
    return layers + linear("fc", 2048, 1000)


def vgg16() -> list[Layer]:
    """Simonyan and Zisserman 2015, torchvision vgg16 (138,357,544 parameters)."""
    layers: list[Layer] = []
    cin = 3
    index = 0
    for cout in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        if cout == "M":
            index += 1
            continue
        assert isinstance(cout, int)
        layers += conv(f"features.{index}", cin, cout, 3, True)
        cin = cout
        index += 2
    return layers + linear("classifier.0", 512 * 7 * 7, 4096) + linear("classifier.3", 4096, 4096) + linear(
        "classifier.6", 4096, 1000)


def bert_base() -> list[Layer]:
    """Devlin et al. 2019, BERT-base uncased with pooler (109,482,240 parameters)."""
    h, ff, vocab = 768, 3072, 30522
    layers: list[Layer] = [
        ("embeddings.word_embeddings.weight", vocab * h, "embedding"),
        ("embeddings.position_embeddings.weight", 512 * h, "embedding"),
        ("embeddings.token_type_embeddings.weight", 2 * h, "embedding"),
    ] + norm("embeddings.LayerNorm", h)
    for i in range(12):
        p = f"encoder.layer.{i}"
        for part in ("query", "key", "value"):
            layers += linear(f"{p}.attention.self.{part}", h, h)
        layers += linear(f"{p}.attention.output.dense", h, h) + norm(f"{p}.attention.output.LayerNorm", h)
        layers += linear(f"{p}.intermediate.dense", h, ff) + linear(f"{p}.output.dense", ff, h)
        layers += norm(f"{p}.output.LayerNorm", h)
    return layers + linear("pooler.dense", h, h)


def small_cnn() -> list[Layer]:
    """LeNet-5 style CNN for 28x28 images (61,706 parameters); the training demo's model family."""
    return (conv("conv1", 1, 6, 5, True) + conv("conv2", 6, 16, 5, True) + linear("fc1", 16 * 5 * 5, 120)
            + linear("fc2", 120, 84) + linear("fc3", 84, 10))


MODELS = {
    "resnet50": (resnet50, "torchvision.models.resnet50 (He et al., CVPR 2016)", 25_557_032),
    "vgg16": (vgg16, "torchvision.models.vgg16 (Simonyan & Zisserman, ICLR 2015)", 138_357_544),
    "bert-base": (bert_base, "bert-base-uncased (Devlin et al., NAACL 2019), with pooler", 109_482_240),
    "small-cnn": (small_cnn, "LeNet-5 style CNN (LeCun et al. 1998) for 28x28 inputs", 61_706),
}
COMPUTE: dict[str, tuple[str, Flops, list[Measurement]]] = {  # model -> (one sample, module FLOPs, measurements)
    "resnet50": ("one 224x224 image", resnet50_flops(), RESNET50_MEASURED),
    "vgg16": ("one 224x224 image", vgg16_flops(), RESNET50_MEASURED),  # ResNet-50's efficiency, borrowed
    "bert-base": (f"one sequence of {BERT_SEQUENCE} tokens, {BERT_PREDICTIONS} of them masked", bert_flops(),
                  BERT_MEASURED),
    "small-cnn": ("one 28x28 image", small_cnn_flops(), []),  # no published measurement: not emulated
}


def module_of(tensor: str) -> str:
    return tensor.rsplit(".", 1)[0]


def compute_doc(name: str, layers: list[Layer]) -> dict[str, object]:
    sample, flops, measured = COMPUTE[name]
    modules: dict[str, list[str]] = {}
    for tensor, _, _ in layers:
        modules.setdefault(module_of(tensor), []).append(tensor)
    assert set(modules) == set(flops), (name, set(modules) ^ set(flops))
    return {"input": sample, "modules": [{"name": m, "forward_flops": flops[m], "tensors": ts}
                                         for m, ts in modules.items()],
            "calibrations": [{k: str(v) if k in ("device", "precision") else v for k, v in asdict(c).items()}
                             for c in calibrations(name, measured)]}


def main() -> None:
    for name, (build, source, total) in MODELS.items():
        layers = build()
        count = sum(n for _, n, _ in layers)
        assert count == total, (name, count, total)
        doc = {"format": MODEL_FORMAT, "model": name, "source": source, "parameters": count,
               "layers": [{"name": n, "elements": e, "kind": k} for n, e, k in layers],
               "compute": compute_doc(name, layers)}
        (HERE / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        forward = sum(COMPUTE[name][1].values())
        print(f"{name}: {len(layers)} tensors, {count:,} parameters, {forward / 1e9:.2f} GFLOPs forward per sample")


if __name__ == "__main__":
    main()

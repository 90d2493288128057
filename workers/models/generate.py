"""Generate the per-layer gradient size profiles (workers/models/*.json) from the architectures.

Each profile lists the model's parameter tensors in forward order, as PyTorch's
`named_parameters()` would (conv/linear weight and bias, batch-norm weight and bias,
layer-norm weight and bias, embeddings), with their element counts; the totals match
the published parameter counts (checked by tests/unit/test_workloads.py). Run:

    python -m workers.models.generate
"""

from __future__ import annotations

import json
from pathlib import Path

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


def main() -> None:
    for name, (build, source, total) in MODELS.items():
        layers = build()
        count = sum(n for _, n, _ in layers)
        assert count == total, (name, count, total)
        doc = {"model": name, "source": source, "parameters": count,
               "layers": [{"name": n, "elements": e, "kind": k} for n, e, k in layers]}
        (HERE / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{name}: {len(layers)} tensors, {count:,} parameters")


if __name__ == "__main__":
    main()

"""Makes ResNet-18 (torchvision's architecture, seeded random weights, 1x3x224x224 -> 1000) the 2026 way for the
int8 benchmarks of issue 35: litert-torch's convert, then ai-edge-quantizer's static_wi8_ai8 (calibrated on 4 seeded
random inputs; int8 model I/O) and dynamic_wi8_afp32 recipes. The files (~12 MB each) are not bundled: they go to
../shared/models (or --out), where bench/conftest.find_model finds them. Runs in the torch environment of
scripts/make_litert_torch_models.py (whose helpers it uses):

    /work/venv-torch/bin/python scripts/make_resnet18_int8.py [--out DIR]

That environment needs only torch, litert-torch, ai-edge-quantizer and ai-edge-litert (no transformers):
`python3.11 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch==2.13.0 litert-torch==0.10.0
ai-edge-quantizer==0.10.0 ai-edge-litert==2.3.0` (~2 GB; about 40 minutes on the shared 2-vCPU Xeon,
then 1.5 minutes to write both models).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_litert_torch_models as m  # noqa: E402  (sets up the converter's environment, imports torch)

torch, nn = m.torch, m.nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.mean(x, dim=(2, 3)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "shared" / "models"))
    args = ap.parse_args()
    rs = m._seed(35)
    net = ResNet18().eval()
    m._randomize_norms(net)
    x = rs.standard_normal((1, 3, 224, 224)).astype(np.float32)
    calib = [rs.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(4)]
    f32 = m.convert_plain(net, (torch.from_numpy(x),))
    cal = {"serving_default": [{"args_0": c} for c in calib]}
    for recipe in ("static_wi8_ai8", "dynamic_wi8_afp32"):
        path = Path(args.out) / f"resnet18_{recipe}.tflite"
        path.write_bytes(m.quantize(f32, recipe, cal))
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()

"""The recommendation model of model.py as a KernelBench-format MODEL file, with its workload.

`kernelevolve tune-model examples/recsys/workload.py` starts here, from the model and the batch
sizes it serves, not from the three hand-written problem files beside it: it profiles
`RecModel`, finds its hot regions below the modules, writes its own problems, optimises,
serves and measures them. `Model` is `RecModel` with make_model()'s embedding scale applied in
the constructor; CASES are the serving batches (mostly 1024, some 512 and 2048).
"""
import importlib.util
import sys
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent


def _model_module():
    name = "recsys_model"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _HERE / "model.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_m = _model_module()

BATCH = 1024

CASES = [
    {"name": "b1024", "weight": 2.0, "BATCH": 1024},
    {"name": "b512", "weight": 1.0, "BATCH": 512},
    {"name": "b2048", "weight": 1.0, "BATCH": 2048},
]


class Model(_m.RecModel):
    def __init__(self):
        super().__init__()
        with torch.no_grad():  # make_model's table scale: interaction inputs of ~0.1
            for bag in self.embeddings:
                bag.embedding.weight.mul_(0.1 / _m.BAG ** 0.5)


def get_inputs():
    return _m.make_inputs(BATCH)


def get_init_inputs():
    return []

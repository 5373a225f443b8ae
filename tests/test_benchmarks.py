"""The benchmarks' own machinery, where a claim rests on it: training several models of one
shape at once (benchmarks/stacked.py) computes what training them one after another does."""

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# each clip is below the gradient norm of some models at some of these first steps, and above
# that of others (sequences: norms 0.21 to 0.28; Life: 0.45 to 1.67)
@pytest.mark.parametrize("case, models, clip", [("sequences", 3, 0.25), ("life", 2, 1.0)])
def test_models_trained_at_once_end_where_they_end_trained_one_after_another(case, models, clip):
    stacked = load("stacked")
    run = stacked.two_ways(case, models, steps=4, grad_clip=clip)
    assert run["gap"] < 1e-5  # the first step's gradients: float rounding apart
    for i, model in enumerate(run["separate"]):
        for key, weight in model.named_parameters():
            torch.testing.assert_close(run["stacked"][key][i].detach(), weight.detach(), rtol=1e-4, atol=1e-5,
                                       msg=lambda m: f"{case}, model {i}, {key}: {m}")


def test_clipping_per_model_scales_each_model_s_gradients_alone():
    stacked = load("stacked")
    params = {"a": torch.zeros(2, 3, requires_grad=True), "b": torch.zeros(2, 4, requires_grad=True)}
    params["a"].grad = torch.tensor([[3.0, 0, 0], [0.1, 0, 0]])
    params["b"].grad = torch.tensor([[0, 4.0, 0, 0], [0, 0, 0.1, 0]])
    stacked.clip_per_model(params, 1.0)
    # model 0's norm was 5: scaled to 1; model 1's was under 1: left as it was
    torch.testing.assert_close(params["a"].grad[0], torch.tensor([0.6, 0, 0]), atol=1e-6, rtol=0)
    torch.testing.assert_close(params["b"].grad[0], torch.tensor([0, 0.8, 0, 0]), atol=1e-6, rtol=0)
    assert params["a"].grad[1].tolist() == pytest.approx([0.1, 0, 0])
    assert params["b"].grad[1].tolist() == pytest.approx([0, 0, 0.1, 0])

"""Benchmarks: 8 seeds of a small ConvNet, one after another with train_minibatch vs stacked as one grouped model.

Run with `pytest tests/benchmarks --benchmark-only` (benchmarks are disabled in the default run).
Width 0.25 (filters 8, 8, 16, 16; dense 128, 256) on 8×16 digit-like inputs, 128 samples, batch 32,
3 epochs of Adam (early stopping off): both sides do the same 12 steps per seed from the same
initialisations and data orders, so the ratio is the cost per seed-step.
"""

from __future__ import annotations

import pytest
import torch

from compbench.adapters.convnet import ConvNetAdapter, ConvNetParams
from compbench.training.minibatch import TrainOptions, train_minibatch
from compbench.training.stacked_convnet import StackedConvNet, train_stacked_convnet

SEEDS, SHAPE, N = list(range(8)), (1, 8, 16), 128
OPTIONS = dict(optimizer="adam", lr=1e-3, epochs=3, batch_size=32, loss="mse", loss_tol=0.0, amp=False)
ADAPTER = ConvNetAdapter(ConvNetParams(width=0.25))


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    return torch.rand(N, *SHAPE, generator=g), torch.randn(N, generator=g)


def sequential(x, y):
    """The per-seed path of NetworkAdapter.fit_seeds: one network and optimizer per seed, in turn."""
    for seed in SEEDS:
        train_minibatch(ADAPTER._init(seed, SHAPE), x, y, seed=seed, options=TrainOptions(**OPTIONS))


def stacked(x, y):
    """compbench's convnet path: the 8 seeds as one grouped model."""
    model = StackedConvNet([ADAPTER._init(seed, SHAPE).net for seed in SEEDS])
    train_stacked_convnet(model, x, y, seeds=SEEDS, options=TrainOptions(**OPTIONS))


@pytest.mark.benchmark(group="convnet-8-seeds")
def test_convnet_8_seeds_sequential(benchmark, data):
    benchmark.pedantic(sequential, args=data, rounds=3, warmup_rounds=1)


@pytest.mark.benchmark(group="convnet-8-seeds")
def test_convnet_8_seeds_stacked(benchmark, data):
    benchmark.pedantic(stacked, args=data, rounds=3, warmup_rounds=1)

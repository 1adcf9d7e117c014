"""Package discovery for the two import packages, whose folders are not named like them
(`src/core` is `lceval`, `plugins` is `lceval_plugins`): every sub-package setuptools finds
under each folder ships, so a new benchmark folder needs no list edited. Folders of data
only (tasks/<benchmark>/, ruler/words/, report/assets/) are namespace packages to Python:
they are listed too (setuptools warns about every importable folder it was not told of), and
their files ship through pyproject.toml's package-data. Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

ROOTS = {"lceval": "src/core", "lceval_plugins": "plugins"}

setup(packages=[name for root, folder in ROOTS.items()
                for name in (root, *(f"{root}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])))])

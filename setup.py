"""Package discovery for the two import packages, whose folders are not named like them
(`src/core` is `lceval`, `plugins` is `lceval_plugins`): every sub-package setuptools finds
under each folder ships, so a new benchmark folder needs no list edited. Everything else is
in pyproject.toml."""

from setuptools import find_packages, setup

ROOTS = {"lceval": "src/core", "lceval_plugins": "plugins"}

setup(packages=[name for root, folder in ROOTS.items()
                for name in (root, *(f"{root}.{sub}" for sub in find_packages(folder)))])

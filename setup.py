"""Packages are found, never listed by hand (a package missing from a hand-kept list installs a broken
goma-ext); the one mapped directory is the top-level templates/, shipped as gn_thinlto.templates."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["gn_thinlto", "gn_thinlto.*", "goma_ext", "goma_ext.*", "thinlto_base",
                                        "thinlto_base.*"]), "gn_thinlto.templates"])

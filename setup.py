"""Package discovery for the wheel: every package under graphlint/ and dsv4_model/ as found by
setuptools, and every package under rules/ renamed into graphlint.rules (see pyproject.toml's
package-dir). Everything else about the build is in pyproject.toml."""
from setuptools import find_namespace_packages, setup

# Namespace discovery: a folder ships without an __init__.py, as graphlint/data (the torch
# catalogue, package data) does; every folder of modules has one (tests/test_layout.py).
_SKIP = ["*__pycache__*", "*.egg-info"]
packages = find_namespace_packages(include=["graphlint", "graphlint.*", "dsv4_model", "dsv4_model.*"], exclude=_SKIP)
packages += ["graphlint.rules"] + [f"graphlint.rules.{name}" for name in find_namespace_packages("rules", exclude=_SKIP)]
package_dir = {"graphlint": "graphlint", "graphlint.rules": "rules", "dsv4_model": "dsv4_model"}

setup(packages=packages, package_dir=package_dir)

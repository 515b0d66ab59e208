"""What `pip install .` installs: every module of src/idemgate_verify and
the package's `py.typed` marker (PEP 561), so that type checkers read its
annotations. (The other tests import the working tree's src, whatever copy
the environment holds; this one reads the installed distribution.)"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "idemgate_verify"


def test_the_installed_distribution_holds_every_module_and_py_typed() -> None:
    try:
        files = metadata.files("idemgate-verify") or []
    except metadata.PackageNotFoundError:
        pytest.fail("idemgate-verify is not installed: pip install '.[test]' in packages/python first")
    installed = {Path(str(file)).name for file in files if Path(str(file)).parts[0] == "idemgate_verify"}
    expected = {path.name for path in SRC.iterdir() if path.suffix == ".py" or path.name == "py.typed"}
    assert "py.typed" in expected
    missing = expected - installed
    assert not missing, f"not installed (reinstall after adding a module): {sorted(missing)}"
    assert "Typing :: Typed" in (metadata.metadata("idemgate-verify").get_all("Classifier") or [])

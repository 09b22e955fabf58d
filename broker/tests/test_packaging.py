"""What installing trafka puts into site-packages: one import package, ``trafka``, whose subpackages are
the repository's three layers (pyproject.toml's package list and folder mapping)."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("wire", "storage", "broker")


def setuptools_settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_of_the_layers_is_installed_under_trafka() -> None:
    found = {"trafka"}
    for layer in LAYERS:
        for init in (ROOT / layer).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT)
            if "tests" not in relative.parts:
                found.add(".".join(("trafka", *relative.parts)))
    assert sorted(setuptools_settings()["packages"]) == sorted(found)


def test_each_layer_is_mapped_to_its_folder() -> None:
    mapping = setuptools_settings()["package-dir"]
    assert mapping == {"trafka": "broker/_trafka", **{f"trafka.{layer}": layer for layer in LAYERS}}
    assert sorted(path.name for path in (ROOT / "broker" / "_trafka").iterdir() if path.suffix == ".py") == ["__main__.py"]


def test_entry_points_name_trafka_modules() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"trafka": "trafka.broker.tools.cli:main"}
    assert project["entry-points"]["pytest11"] == {"trafka": "trafka.broker.testing.pytest_plugin"}

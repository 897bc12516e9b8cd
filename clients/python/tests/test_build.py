"""The in-tree build backend (build_backend/skillpilot_build.py)."""

import base64
import hashlib
import importlib.util
import os
import sys
import tempfile
import unittest
import zipfile

import skillpilot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def backend():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("skillpilot_build", os.path.join(ROOT, "build_backend", "skillpilot_build.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildTest(unittest.TestCase):
    def test_toml_subset_reads_pyproject_like_tomllib(self) -> None:
        b = backend()
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        mine = b._parse_toml_subset(text)
        self.assertEqual(mine["project"]["name"], "skillpilot")
        if sys.version_info >= (3, 11):
            import tomllib
            self.assertEqual(mine, tomllib.loads(text))

    def test_version_matches_the_package(self) -> None:
        self.assertEqual(backend()._project()["version"], skillpilot.__version__)

    def test_wheel_is_complete_and_its_record_is_right(self) -> None:
        b = backend()
        with tempfile.TemporaryDirectory() as d:
            name = b.build_wheel(d)
            self.assertEqual(name, "skillpilot-%s-py3-none-any.whl" % skillpilot.__version__)
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                for f in ("skillpilot/__init__.py", "skillpilot/py.typed", "skillpilot/cli.py", "skillpilot_master.py"):
                    self.assertIn(f, names)
                self.assertFalse([n for n in names if "__pycache__" in n or "tests" in n])
                di = "skillpilot-%s.dist-info/" % skillpilot.__version__
                self.assertIn("skillpilot-master = skillpilot.cli:main", z.read(di + "entry_points.txt").decode())
                self.assertIn("Requires-Python: >=3.8", z.read(di + "METADATA").decode())
                rows = [r.split(",") for r in z.read(di + "RECORD").decode().splitlines()]
                self.assertEqual({r[0] for r in rows}, names)
                for path, digest, size in rows:
                    if path.endswith("RECORD"):
                        continue
                    data = z.read(path)
                    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), (want, len(data)), path)
            sdist = b.build_sdist(d)
            self.assertTrue(os.path.getsize(os.path.join(d, sdist)) > 0)


if __name__ == "__main__":
    unittest.main()

"""A PEP 517 build backend for the skillpilot package, standard library only.

pip runs it from this tree (pyproject.toml: backend-path), so installing
needs no package from an index: ``pip install ./clients/python`` works on a
machine without network, with or without build isolation. It builds a pure
wheel of the ``skillpilot`` package with the metadata of pyproject.toml's
[project] table, an sdist, and (PEP 660) an editable install.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "skillpilot"


def _parse_toml_subset(text: str) -> Dict[str, Any]:
    """The TOML this project's pyproject.toml uses ([tables], key = "str",
    key = [], key = ["a", "b"]), for Pythons without tomllib (< 3.11)."""
    doc: Dict[str, Any] = {}
    table = doc
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"\[([A-Za-z0-9_.-]+)\]$", line)
        if m:
            table = doc
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        m = re.match(r'([A-Za-z0-9_.-]+)\s*=\s*(.+)$', line)
        if not m:
            raise ValueError("pyproject.toml: cannot read line %r" % raw)
        key, val = m.group(1), m.group(2).strip()
        if val.startswith('"') and val.endswith('"'):
            table[key] = val[1:-1]
        elif val.startswith("[") and val.endswith("]"):
            table[key] = [v.strip().strip('"') for v in val[1:-1].split(",") if v.strip()]
        else:
            raise ValueError("pyproject.toml: unsupported value in %r" % raw)
    return doc


def load_pyproject() -> Dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib  # type: ignore[import-not-found]
    except ImportError:
        return _parse_toml_subset(data.decode("utf-8"))
    return tomllib.loads(data.decode("utf-8"))


def _project() -> Dict[str, Any]:
    return load_pyproject()["project"]


def _dist_name() -> Tuple[str, str]:
    p = _project()
    return re.sub(r"[-_.]+", "_", p["name"]), p["version"]


def _metadata() -> bytes:
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: " + dep)
    return ("\n".join(lines) + "\n").encode("utf-8")


def _entry_points() -> bytes:
    scripts = _project().get("scripts", {})
    if not scripts:
        return b""
    body = "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))
    return body.encode("utf-8")


def _package_files() -> List[str]:
    """The package's .py files and py.typed, then the top-level modules of
    [tool.skillpilot-build] modules that exist."""
    out = []
    for d, dirs, files in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                out.append(os.path.relpath(os.path.join(d, f), ROOT).replace(os.sep, "/"))
    tool = load_pyproject().get("tool", {}).get("skillpilot-build", {})
    for mod in tool.get("modules", []):
        if os.path.isfile(os.path.join(ROOT, mod + ".py")):
            out.append(mod + ".py")
    return out


class _Wheel:
    def __init__(self, path: str) -> None:
        self.zf = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.records: List[str] = []

    def add(self, arcname: str, data: bytes) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        self.records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def close(self, dist_info: str) -> None:
        record = dist_info + "/RECORD"
        self.records.append(record + ",,")
        info = zipfile.ZipInfo(record, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        self.zf.writestr(info, "\n".join(self.records) + "\n")
        self.zf.close()


def _write_dist_info(whl: _Wheel, dist_info: str) -> None:
    whl.add(dist_info + "/METADATA", _metadata())
    whl.add(dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: skillpilot_build\n"
                                  b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    ep = _entry_points()
    if ep:
        whl.add(dist_info + "/entry_points.txt", ep)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    name, version = _dist_name()
    dist_info = "%s-%s.dist-info" % (name, version)
    d = os.path.join(metadata_directory, dist_info)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "wb") as f:
        f.write(_metadata())
    ep = _entry_points()
    if ep:
        with open(os.path.join(d, "entry_points.txt"), "wb") as f:
            f.write(ep)
    return dist_info


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    name, version = _dist_name()
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    whl = _Wheel(os.path.join(wheel_directory, filename))
    for rel in _package_files():
        with open(os.path.join(ROOT, rel), "rb") as f:
            whl.add(rel, f.read())
    dist_info = "%s-%s.dist-info" % (name, version)
    _write_dist_info(whl, dist_info)
    whl.close(dist_info)
    return filename


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """PEP 660: a wheel holding a .pth file that puts this tree on sys.path."""
    name, version = _dist_name()
    filename = "%s-%s-0.editable-py3-none-any.whl" % (name, version)
    whl = _Wheel(os.path.join(wheel_directory, filename))
    whl.add("__editable__.%s.pth" % name, (ROOT + "\n").encode("utf-8"))
    dist_info = "%s-%s.dist-info" % (name, version)
    _write_dist_info(whl, dist_info)
    whl.close(dist_info)
    return filename


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    name, version = _dist_name()
    base = "%s-%s" % (name, version)
    filename = base + ".tar.gz"
    files = ["pyproject.toml", "build_backend/skillpilot_build.py"] + _package_files()
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        def add(arcname: str, data: bytes) -> None:
            ti = tarfile.TarInfo(base + "/" + arcname)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, int(time.time())
            tf.addfile(ti, io.BytesIO(data))
        add("PKG-INFO", _metadata())
        for rel in files:
            with open(os.path.join(ROOT, rel), "rb") as f:
                add(rel, f.read())
    return filename

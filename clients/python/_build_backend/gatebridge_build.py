"""The build backend of gatebridge-client: a PEP 517 / PEP 660 backend in
the tree, standard library only, so that ``pip install ./clients/python``
needs nothing installed first (``requires = []`` in pyproject.toml): it
works offline, without setuptools or wheel.

It packs the one module, ``gatebridge_client.py``, into a pure-Python
wheel (``py3-none-any``); ``build_editable`` makes a wheel whose ``.pth``
file puts this directory on ``sys.path``; ``build_sdist`` a source
archive that builds the same way. The metadata come from pyproject.toml's
``[project]`` table (read by :func:`read_project`, which needs no TOML
library: Python 3.9 and 3.10 have none) and the version from the module's
``__version__``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = "gatebridge_client"
# Files of the source archive, relative to HERE.
SDIST_FILES = ["pyproject.toml", "README.md", MODULE + ".py", "_build_backend/gatebridge_build.py"]
# Zip and tar entries get this time (or $SOURCE_DATE_EPOCH): the same
# sources give the same archives.
EPOCH = 315532800  # 1980-01-01, the earliest a zip can say


def read_project(text: str) -> Dict[str, object]:
    """The ``[project]`` table of a pyproject.toml, as far as this file
    uses TOML: ``key = "string"`` and ``key = ["string", ...]`` on one
    line each; comments and other tables are skipped."""
    out: Dict[str, object] = {}
    table = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            table = line.strip("[]").strip()
            continue
        if table != "project":
            continue
        m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*(.+?)\s*(#.*)?$', line)
        if not m:
            raise ValueError("pyproject.toml: cannot read %r (the in-tree backend reads only one-line strings and lists)" % raw)
        key, value = m.group(1), m.group(2)
        if value.startswith("["):
            out[key] = re.findall(r'"((?:[^"\\]|\\.)*)"', value)
        elif value.startswith('"') and value.endswith('"'):
            out[key] = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        else:
            raise ValueError("pyproject.toml: %s: only strings and lists of strings are read" % key)
    return out


def version() -> str:
    with open(os.path.join(HERE, MODULE + ".py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise ValueError("%s.py has no __version__" % MODULE)
    return m.group(1)


def _project() -> Dict[str, object]:
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        return read_project(f.read())


def _dist_name(project: Dict[str, object]) -> str:
    return re.sub(r"[-_.]+", "_", str(project["name"])).lower()


def metadata() -> str:
    """The core metadata (METADATA, PKG-INFO), version 2.1."""
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % p["name"],
        "Version: %s" % version(),
        "Summary: %s" % p.get("description", ""),
    ]
    if "requires-python" in p:
        lines.append("Requires-Python: %s" % p["requires-python"])
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, str(p["readme"])), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _epoch() -> int:
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", EPOCH)), EPOCH)


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    p = _project()
    name, ver = _dist_name(p), version()
    info = "%s-%s.dist-info" % (name, ver)
    files = files + [
        (info + "/METADATA", metadata().encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: gatebridge_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = io.StringIO()
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write("%s,sha256=%s,%d\n" % (path, digest, len(data)))
    record.write("%s/RECORD,,\n" % info)
    files.append((info + "/RECORD", record.getvalue().encode("utf-8")))
    filename = "%s-%s-py3-none-any.whl" % (name, ver)
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=stamp)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def _read(rel: str) -> bytes:
    with open(os.path.join(HERE, rel), "rb") as f:
        return f.read()


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(MODULE + ".py", _read(MODULE + ".py"))])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    # A .pth line naming a directory adds it to sys.path at start-up.
    return _write_wheel(wheel_directory, [(MODULE + ".pth", (HERE + "\n").encode("utf-8"))])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = "%s-%s" % (_dist_name(p), version())
    filename = base + ".tar.gz"
    entries = [(rel, _read(rel)) for rel in SDIST_FILES]
    entries.append(("PKG-INFO", metadata().encode("utf-8")))
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel, data in entries:
            ti = tarfile.TarInfo(base + "/" + rel)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, _epoch()
            t.addfile(ti, io.BytesIO(data))
    return filename

"""Tests that the client installs with pip from this directory, offline,
with nothing installed first (no setuptools, no wheel): the in-tree build
backend (_build_backend/gatebridge_build.py, ``requires = []``).

    python3 -m unittest discover -s clients/python -p 'test_install.py' -v

The install goes into a fresh venv made without pip (so no setuptools in
it), by the host's pip (``pip --python``, pip >= 22.3), with no package
index and no pip config: a build that needed anything from outside
fails. Without a pip that can do that, a venv with its own pip
(ensurepip) is used, setuptools removed from it; without either, the
tests skip and say what to install.
"""

from __future__ import annotations

import hashlib
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_build_backend"))

import gatebridge_build  # noqa: E402


def _run(argv: List[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kw)


def _offline_env() -> dict:
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PIP_") or k in ("PYTHONPATH", "PYTHONHOME"):
            del env[k]
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    return env


class PipInstallTests(unittest.TestCase):
    venv = ""
    pip: List[str] = []

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp(prefix="gb-pyinstall-")
        cls.venv = os.path.join(cls.tmp, "venv")
        py = os.path.join(cls.venv, "bin", "python")
        env = _offline_env()
        host_pip = _run([sys.executable, "-m", "pip", "--version"], env=env)
        m = re.match(r"pip (\d+)\.(\d+)", host_pip.stdout)
        if m and (int(m.group(1)), int(m.group(2))) >= (22, 3):
            r = _run([sys.executable, "-m", "venv", "--without-pip", cls.venv])
            if r.returncode != 0:
                raise AssertionError("python3 -m venv --without-pip: %s" % r.stdout)
            cls.pip = [sys.executable, "-m", "pip", "--python", py]
            return
        r = _run([sys.executable, "-m", "venv", cls.venv])
        if r.returncode != 0:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise unittest.SkipTest("no pip >= 22.3 for %s and no ensurepip to make a venv with pip "
                                    "(Debian/Ubuntu: apt-get install python3-venv): %s" % (sys.executable, r.stdout.strip()[-200:]))
        cls.pip = [py, "-m", "pip"]
        _run(cls.pip + ["uninstall", "-y", "setuptools", "wheel"], env=env)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pip_run(self, *args: str) -> None:
        r = _run(self.pip + list(args), env=_offline_env(), cwd=self.tmp)
        self.assertEqual(r.returncode, 0, "pip %s:\n%s" % (" ".join(args), r.stdout))

    def venv_python(self, code: str) -> str:
        """Runs code in the venv, from a directory outside the repository
        (so the import cannot come from the working directory)."""
        r = _run([os.path.join(self.venv, "bin", "python"), "-c", code], cwd=self.tmp, env=_offline_env())
        self.assertEqual(r.returncode, 0, r.stdout)
        return r.stdout.strip()

    def test_install_offline_without_setuptools(self) -> None:
        self.assertIn("no setuptools", self.venv_python(
            "import importlib.util as u; print('no setuptools' if u.find_spec('setuptools') is None else 'setuptools')"))
        self.pip_run("install", HERE)  # the isolated build gets nothing: requires = []
        try:
            where = self.venv_python(
                "from gatebridge_client import Client, GatebridgeError; import gatebridge_client as g; print(g.__file__, g.__version__)")
            path, version = where.split()
            self.assertTrue(path.startswith(self.venv + os.sep), path)
            self.assertEqual(version, gatebridge_build.version())
            # The same without build isolation (Debian's way for others).
            self.pip_run("install", "--force-reinstall", "--no-build-isolation", HERE)
        finally:
            self.pip_run("uninstall", "-y", "gatebridge-client")

    def test_editable_install(self) -> None:
        self.pip_run("install", "-e", HERE)
        try:
            path = self.venv_python("import gatebridge_client as g; print(g.__file__)")
            self.assertEqual(os.path.realpath(path), os.path.realpath(os.path.join(HERE, "gatebridge_client.py")))
        finally:
            self.pip_run("uninstall", "-y", "gatebridge-client")


class BackendTests(unittest.TestCase):
    """The backend's own output, without pip."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="gb-pybuild-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_wheel(self) -> None:
        name = gatebridge_build.build_wheel(self.tmp)
        version = gatebridge_build.version()
        self.assertEqual(name, "gatebridge_client-%s-py3-none-any.whl" % version)
        with zipfile.ZipFile(os.path.join(self.tmp, name)) as z:
            info = "gatebridge_client-%s.dist-info/" % version
            self.assertEqual(sorted(z.namelist()), sorted(
                ["gatebridge_client.py", info + "METADATA", info + "WHEEL", info + "RECORD"]))
            with open(os.path.join(HERE, "gatebridge_client.py"), "rb") as f:
                self.assertEqual(z.read("gatebridge_client.py"), f.read())
            meta = z.read(info + "METADATA").decode()
            self.assertIn("\nName: gatebridge-client\n", meta)
            self.assertIn("\nVersion: %s\n" % version, meta)
            self.assertIn("\nRequires-Python: >=3.9\n", meta)
            self.assertNotIn("Requires-Dist", meta)  # standard library only at run time
            # RECORD lists every other file with its right hash and size.
            rows = [line.split(",") for line in z.read(info + "RECORD").decode().splitlines()]
            self.assertEqual(sorted(r[0] for r in rows), sorted(z.namelist()))
            for path, digest, size in rows:
                if path == info + "RECORD":
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = z.read(path)
                want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((digest, int(size)), (want, len(data)), path)

    def test_wheel_is_reproducible(self) -> None:
        a, b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        os.mkdir(a)
        os.mkdir(b)
        with open(os.path.join(a, gatebridge_build.build_wheel(a)), "rb") as fa, \
                open(os.path.join(b, gatebridge_build.build_wheel(b)), "rb") as fb:
            self.assertEqual(fa.read(), fb.read())

    def test_sdist_builds_the_same_wheel(self) -> None:
        import tarfile

        name = gatebridge_build.build_sdist(self.tmp)
        with tarfile.open(os.path.join(self.tmp, name)) as t:
            base = name[: -len(".tar.gz")]
            names = t.getnames()
            for rel in gatebridge_build.SDIST_FILES + ["PKG-INFO"]:
                self.assertIn(base + "/" + rel, names)
            t.extractall(self.tmp)  # our own archive, just made
        r = _run([sys.executable, "-c", "import gatebridge_build as b, sys; print(b.build_wheel(sys.argv[1]))", self.tmp],
                 cwd=os.path.join(self.tmp, base, "_build_backend"))
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_read_project_matches_toml(self) -> None:
        try:
            import tomllib  # type: ignore[import-not-found]
        except ImportError:
            self.skipTest("no tomllib before Python 3.11")
        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            want = tomllib.load(f)["project"]
        with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
            self.assertEqual(gatebridge_build.read_project(f.read()), want)
        with self.assertRaises(ValueError):
            gatebridge_build.read_project("[project]\nversion = 1\n")


if __name__ == "__main__":
    unittest.main()

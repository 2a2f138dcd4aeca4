"""The build backend (scripts/build_backend.py, issue 33) adds a precompiled kernel cache to the wheel setuptools
built: the files land under lite_numba/_precompiled with RECORD lines whose hashes and sizes are right (an
installer checks them), a failed warm-up leaves the wheel as it was, and LITE_NUMBA_PRECOMPILE=0 builds a plain
wheel without asking for the run-time dependencies. The warm-up itself is the real `lite-numba warmup --into`
(tests/test_cache_locator.py tests what it writes and that an installation loads it); here it is replaced by a
stand-in that writes two files, so the test runs in a second."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def backend():
    spec = importlib.util.spec_from_file_location("lite_numba_build_backend", ROOT / "scripts" / "build_backend.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wheel(path: Path) -> Path:
    files = {"lite_numba/__init__.py": b"x = 1\n", "lite_numba-0.1.0.dist-info/METADATA": b"Name: lite-numba\n"}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for n, d in files.items()) + "lite_numba-0.1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr("lite_numba-0.1.0.dist-info/RECORD", record)
    return path


def _check_record(path: Path) -> list[str]:
    """Every file of the wheel is in RECORD with its sha256 and size (RECORD itself without); returns the names."""
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = [ln.split(",") for ln in z.read(record).decode().splitlines() if ln]
        assert sorted(r[0] for r in rows) == sorted(names)
        for name, digest, size in rows:
            if name == record:
                assert (digest, size) == ("", "")
                continue
            data = z.read(name)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)
    return names


def test_precompiled_files_are_added_with_their_record_lines(backend, tmp_path, monkeypatch):
    wheel = _wheel(tmp_path / "lite_numba-0.1.0-py3-none-any.whl")
    seen = {}

    def warmup(cmd, env, **kw):
        seen.update(cmd=cmd, env=env)
        into = Path(cmd[cmd.index("--into") + 1])
        (into / "KEY" / "mod").mkdir(parents=True)
        (into / "KEY" / "manifest.json").write_text('{"levels": []}')
        (into / "KEY" / "mod" / "f-1.py311.nbc").write_bytes(b"\x00code" * 100)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(backend.subprocess, "run", warmup)
    assert backend.add_precompiled(wheel, ["host", "avx2"])
    names = _check_record(wheel)
    assert "lite_numba/_precompiled/KEY/mod/f-1.py311.nbc" in names
    assert "lite_numba/__init__.py" in names
    assert seen["cmd"][seen["cmd"].index("--levels") + 1] == "host,avx2"
    assert seen["env"]["PYTHONPATH"].split(":")[0].endswith("wheel")  # the unpacked wheel is what warms up


def test_a_failed_warmup_leaves_the_wheel_as_it_was(backend, tmp_path, monkeypatch):
    wheel = _wheel(tmp_path / "lite_numba-0.1.0-py3-none-any.whl")
    before = wheel.read_bytes()
    monkeypatch.setattr(backend.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "boom"))
    assert not backend.add_precompiled(wheel, ["host"])
    assert wheel.read_bytes() == before


def test_precompile_levels_and_build_requirements(backend, monkeypatch):
    monkeypatch.setattr(backend._setuptools, "get_requires_for_build_wheel", lambda cs=None: [])
    monkeypatch.delenv("LITE_NUMBA_PRECOMPILE", raising=False)
    assert backend.precompile_levels() == ["auto"]
    assert any(r.startswith("numba") for r in backend.get_requires_for_build_wheel())
    monkeypatch.setenv("LITE_NUMBA_PRECOMPILE", "host, avx2")
    assert backend.precompile_levels() == ["host", "avx2"]
    monkeypatch.setenv("LITE_NUMBA_PRECOMPILE", "0")
    assert backend.precompile_levels() == []
    assert backend.get_requires_for_build_wheel() == []


def test_the_build_requirements_are_the_runtime_dependencies(backend):
    """The backend asks for what pyproject.toml's [project] dependencies name (the warm-up imports them)."""
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert sorted(backend.RUNTIME_REQUIRES) == sorted(project["project"]["dependencies"])
    assert project["build-system"]["build-backend"] == "build_backend"

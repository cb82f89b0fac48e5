"""The package's Numba cache is dropped when any of its sources changes (_numba_cache)."""

from __future__ import annotations

import os

from lattice_lgm import _numba_cache


def _tree(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "__pycache__").mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.py").write_text("y = 2\n")
    return root


def _cache_files(root):
    files = [root / "__pycache__" / "a.f-1.py311.nbi", root / "__pycache__" / "a.f-1.py311.1.nbc",
             root / "sub" / "__pycache__" / "b.g-3.py311.nbi"]
    for f in files:
        f.write_bytes(b"cached")
    return files


def test_an_edit_to_any_source_drops_every_cache_file(tmp_path):
    root = _tree(tmp_path)
    assert _numba_cache.refresh(root)          # no stamp yet
    files = _cache_files(root)
    assert not _numba_cache.refresh(root)      # unchanged sources: the cache stays
    assert all(f.exists() for f in files)
    b = root / "sub" / "b.py"                  # an edit in another file than the caller's
    st = b.stat()
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert _numba_cache.refresh(root)
    assert not any(f.exists() for f in files)
    (root / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"pyc")
    _cache_files(root)
    (root / "c.py").write_text("z = 3\n")      # a new module counts too
    assert _numba_cache.refresh(root)
    assert (root / "__pycache__" / "a.cpython-311.pyc").exists()  # Python's own cache stays


def test_a_read_only_tree_is_left_alone(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    files = _cache_files(root)

    def refuse(self, *a, **k):
        raise PermissionError("read-only")

    monkeypatch.setattr(type(root), "unlink", refuse)
    assert not _numba_cache.refresh(root)
    assert all(f.exists() for f in files)


def test_the_package_stamp_is_current_after_import():
    stamp = (_numba_cache.ROOT / _numba_cache.STAMP_NAME)
    assert stamp.read_text() == _numba_cache.source_stamp()

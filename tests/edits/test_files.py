import os

import pytest

from rewriter.apply.files import FileError, atomic_write, read_source


def test_reads_utf8_and_rejects_what_it_cannot_rewrite(tmp_path):
    good = tmp_path / "a.py"
    good.write_text("x = 'é'\n", encoding="utf-8")
    assert read_source(good).text == "x = 'é'\n"
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01\x02")
    latin = tmp_path / "c.py"
    latin.write_bytes("x = 'é'\n".encode("latin-1"))
    for path, reason in [(binary, "binary"), (latin, "not UTF-8"), (tmp_path / "missing.py", "no such file"),
                         (tmp_path, "directory")]:
        with pytest.raises(FileError, match=reason):
            read_source(path)


def test_atomic_write_keeps_mode_bom_and_line_endings(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"\xef\xbb\xbfa = 1\r\n")
    path.chmod(0o755)
    source = read_source(path)
    assert source.text == "a = 1\r\n"
    atomic_write(source, "a = 2\r\n")
    assert path.read_bytes() == b"\xef\xbb\xbfa = 2\r\n"
    assert oct(path.stat().st_mode & 0o777) == oct(0o755)


def test_a_failure_while_writing_leaves_the_original_untouched(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text("original\n")
    source = read_source(path)

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write(source, "rewritten\n")
    assert path.read_text() == "original\n"
    assert os.listdir(tmp_path) == ["a.py"]  # no temporary file left behind


def test_refuses_to_overwrite_a_file_changed_on_disk(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("original\n")
    source = read_source(path)
    path.write_text("edited by the user meanwhile\n")
    with pytest.raises(FileError, match="changed on disk"):
        atomic_write(source, "rewritten\n")
    assert path.read_text() == "edited by the user meanwhile\n"

"""The Python examples run, as a reader runs them, and do what docs/python.md
shows (its python blocks are excerpts of them: tools/check_doc_code.py)."""
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def run(name, *args, timeout=300):
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_answers_help(name):
    out = run(name, "--help")
    assert out.returncode == 0 and out.stdout.strip(), out.stderr


def test_first_loop_runs_both_loaders():
    pytest.importorskip("torch")
    out = run("first_loop.py")
    assert out.returncode == 0, out.stderr
    assert "eachobs:" in out.stdout and "torch:" in out.stdout


def test_resume_finishes_the_epoch_in_a_second_process():
    pytest.importorskip("torch")
    out = run("resume.py")
    assert out.returncode == 0, out.stderr
    assert "each once" in out.stdout


def test_numba_train_learns_fashion_mnist():
    pytest.importorskip("torch")
    pytest.importorskip("numba")
    out = run("numba_train.py", "--check")
    if out.returncode == 77:
        pytest.skip(out.stderr.strip())
    assert out.returncode == 0, out.stderr
    assert "test accuracy" in out.stdout

"""The README's Python example runs as written (from a directory next to ../shared)."""

import os
import re
import subprocess
import sys

from conftest import DATASETS, REPO, dataset_dir


def test_readme_python_example_runs(tmp_path):
    dataset_dir("planetoid_cora")
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "README: no python example under '## From Python'"
    work = tmp_path / "clone"
    work.mkdir()
    os.symlink(DATASETS.parent, tmp_path / "shared")
    p = subprocess.run([sys.executable, "-c", blocks[0]], cwd=work, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split()
    best = float(lines[-1])
    assert 0.3 < best <= 1.0, p.stdout
    assert (work / "runs" / "cora-py" / "summary.json").is_file()

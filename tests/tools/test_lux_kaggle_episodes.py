"""``tools/lux_kaggle_episodes.py``'s bad input: one line, nothing overwritten."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "lux_kaggle_episodes.py"


def test_an_out_that_is_a_file_is_one_line_and_left_alone(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    done = subprocess.run([sys.executable, str(TOOL), "--games", "1", "--out", str(afile)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        f"--out {afile} is a file; name a folder for the episodes")
    assert "Traceback" not in done.stderr and afile.read_text() == "mine"

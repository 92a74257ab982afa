"""The tree stays portable and clean: docs cite shared notes relative to the repository (not by this
machine's absolute paths), and the images/videos the tools write are ignored by git."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from ros_helpers import REPO

ABSOLUTE = re.compile(r"(?<![\w.~])/(?:work|home|Users)/[\w.-]+")


def test_docs_cite_no_absolute_machine_paths():
    docs = [
        p
        for p in REPO.rglob("*.md")
        if not any(part in (".venv", "build", "install", ".cache", "log") for part in p.relative_to(REPO).parts)
    ]
    assert docs
    hits = [
        f"{p.relative_to(REPO)}:{i}: {m.group(0)}"
        for p in docs
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if (m := ABSOLUTE.search(line))
    ]
    assert not hits, "cite ../shared/notes/... instead of absolute paths:\n" + "\n".join(hits)


def test_rendered_outputs_are_git_ignored():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    names = ["run.png", "run.mp4", "docs/strip.png", "gradvar.png", "bench/strip.png"]
    r = subprocess.run(["git", "check-ignore", *names], cwd=REPO, capture_output=True, text=True)
    assert sorted(r.stdout.split()) == sorted(names), r.stdout + r.stderr

"""The docs stay usable: every relative link in README.md, bench/README.md and docs/**/*.md points at a file of
this repository (and, with #anchor, at a heading of that file), and README.md keeps its contract with a newcomer:
exactly the two set-up commands CI runs, and the main job's one command. Pure text checks, no imports of bcg."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SETUP_COMMANDS = ["make setup", "make test"]
MAIN_JOB = "bcg-train --preset cpu --motion dance --reward tracking"

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def doc_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [f for f in files if f.is_file()]


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, formatting and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub("", path.read_text())):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    bad = []
    for m in LINK.finditer(prose(path.read_text())):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(REPO)}: ({target})"
        if not dest.is_relative_to(REPO):
            bad.append(f"{where} leaves the repository")
        elif not dest.exists():
            bad.append(f"{where} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(REPO)}")
    return bad


def code_lines(text: str) -> list[list[str]]:
    """Each fenced block's command lines, comments and blank lines dropped."""
    blocks = []
    for m in FENCE.finditer(text):
        lines = m.group(0).splitlines()[1:-1]
        blocks.append([ln.split(" #")[0].strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")])
    return blocks


def test_doc_files_found():
    names = {str(p.relative_to(REPO)) for p in doc_files()}
    assert {"README.md", "bench/README.md", "docs/sim.md", "docs/eval.md", "docs/training.md"} <= names


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    bad = broken_links(path)
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_slug_matches_github():
    assert slug("Choosing B and H") == "choosing-b-and-h"
    heading = "A 5 ms substep: the normal contact spring implicit"
    assert slug(heading) == "a-5-ms-substep-the-normal-contact-spring-implicit"
    assert slug("On a robot (ROS 2 Humble/Jazzy/Kilted + colcon)") == "on-a-robot-ros-2-humblejazzykilted--colcon"
    assert slug("Run `bcg-eval` — [results](x.md)") == "run-bcg-eval--results"


def test_link_checker_catches_a_broken_link(tmp_path, monkeypatch):
    repo = tmp_path.resolve()
    (repo / "docs").mkdir()
    (repo / "docs" / "a.md").write_text("# Top\n\n## Some part\n")
    page = repo / "README.md"
    page.write_text(
        "[ok](docs/a.md#some-part) [gone](docs/b.md) [bad anchor](docs/a.md#nope) "
        "[web](https://example.org) `[code](not/a/link.md)`\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", repo)
    bad = broken_links(page)
    assert len(bad) == 2 and "docs/b.md" in bad[0] and "#nope" in bad[1], bad


def test_readme_has_exactly_the_two_setup_commands_ci_runs():
    readme = (REPO / "README.md").read_text()
    make_blocks = [b for b in code_lines(readme) if any(ln.startswith("make ") for ln in b)]
    assert make_blocks == [SETUP_COMMANDS], make_blocks
    ci = (REPO / ".ci" / "run").read_text()
    for cmd in SETUP_COMMANDS:
        assert re.search(rf"^{re.escape(cmd)}\b", ci, re.M), f".ci/run no longer runs {cmd!r}"
        assert re.search(rf"^{cmd.split()[1]}:", (REPO / "Makefile").read_text(), re.M), f"no Makefile target {cmd}"


def test_readme_keeps_the_main_job_command():
    readme = (REPO / "README.md").read_text()
    commands = [ln for b in code_lines(readme) for ln in b]
    assert any(ln.endswith(MAIN_JOB) for ln in commands), f"README lost the main job: {MAIN_JOB}"
    assert (REPO / "config" / "train" / "cpu.yaml").is_file()
    assert (REPO / "policies" / "dance" / "policy.yaml").is_file(), "README runs bcg-eval policies/dance"


@pytest.mark.parametrize("name", ["README.md", "docs/sim.md", "docs/eval.md", "docs/training.md"])
def test_guides_carry_no_dated_results(name):
    """Guides teach; dated measurements belong in docs/results/<topic>.md (newest first) or bench's results."""
    text = (REPO / name).read_text()
    hits = [ln for ln in text.splitlines() if DATE.search(ln) or " UTC" in ln]
    assert not hits, f"{name}: move dated results to docs/results/:\n" + "\n".join(hits)

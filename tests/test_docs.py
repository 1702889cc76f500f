"""The documentation's relative links and anchors resolve, and the README stays one screen."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

#: The README is the first screen a host reads; the rest lives in docs/.
README_MAX_BYTES = 8 * 1024

_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documentation(root: Path) -> list[Path]:
    """The pages that link to each other: the README, docs/, CONTRIBUTING.md, bench's and the tests' READMEs."""
    pages = [root / "README.md", root / "CONTRIBUTING.md", root / "bench" / "README.md", root / "tests" / "README.md"]
    return [page for page in pages if page.exists()] + sorted((root / "docs").glob("**/*.md"))


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text of its markdown, lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(root: Path) -> list[str]:
    """Every relative link among the documentation pages whose file or anchor does not exist."""
    problems: list[str] = []
    for page in documentation(root):
        for number, line in _prose_lines(page.read_text(encoding="utf-8")):
            for target in _LINK.findall(_CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …: not ours to check
                    continue
                path_part, _, anchor = target.partition("#")
                linked = (page.parent / path_part).resolve() if path_part else page
                where = f"{page.relative_to(root)}:{number}: {target}"
                if not linked.exists():
                    problems.append(f"{where}: no such file")
                elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                    problems.append(f"{where}: no heading with this anchor in {linked.name}")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    assert broken_links(REPO_ROOT) == []


def test_a_broken_file_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Bot\n\n## Set-up\n\n[ok](docs/page.md#the-demo) [gone](docs/missing.md) [bad](docs/page.md#nowhere)\n"
        "[self](#set-up) [self gone](#setup) `[in code](docs/missing.md)`\n\n```sh\n[fenced](nothing.md)\n```\n"
    )
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## The demo\n\n[back](../README.md#set-up)\n")
    assert broken_links(tmp_path) == [
        "README.md:5: docs/missing.md: no such file",
        "README.md:5: docs/page.md#nowhere: no heading with this anchor in page.md",
        "README.md:6: #setup: no heading with this anchor in README.md",
    ]


def test_anchors_follow_githubs_rules() -> None:
    assert slug("Why `MAX_REQUESTS_PER_SECOND` defaults to 20") == "why-max_requests_per_second-defaults-to-20"
    assert slug("Dry run against the simulator (spends nothing)") == "dry-run-against-the-simulator-spends-nothing"
    assert slug("Moving from SQLite to PostgreSQL") == "moving-from-sqlite-to-postgresql"
    assert slug("How a `/video` flows") == "how-a-video-flows"


def test_the_readme_is_one_screen() -> None:
    size = len((REPO_ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes: move detail into docs/"


def test_the_check_example_shows_this_versions_schema() -> None:
    from bot.store.jobs import SCHEMA_VERSION

    shown = re.findall(r"^database: OK \(schema (\d+)\)$", (REPO_ROOT / "docs" / "operations.md").read_text(),
                       flags=re.MULTILINE)
    assert shown == [str(SCHEMA_VERSION)], "docs/operations.md's `check` example shows another schema"

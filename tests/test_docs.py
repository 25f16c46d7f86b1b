"""The docs hold together: every relative link and image in README.md and docs/**/*.md names a file
or folder that exists, and README.md stays a five-minute read. Pure: no network, no processes."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from conftest import REPO

README_MAX_LINES = 170

# [text](target) and ![alt](target), with an optional "title"; the text may hold one level of
# brackets (an image inside a link), the target may be written <in angle brackets>
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
EXTERNAL = ("http://", "https://", "mailto:")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside fenced code blocks and
    inline code spans."""
    found = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            found.append((number, match.group(1).strip("<>")))
    return found


def broken_links(page: Path) -> list[str]:
    problems = []
    for number, target in links(page.read_text()):
        if target.startswith(EXTERNAL) or target.startswith("#"):
            continue
        path = unquote(target.split("#", 1)[0])
        resolved = (page.parent / path).resolve()
        if not resolved.exists():
            problems.append(
                f"{page.relative_to(REPO)}:{number}: link {target!r} names {resolved}, "
                "which does not exist"
            )
    return problems


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    assert (REPO / "docs").is_dir()
    problems = [problem for page in pages() for problem in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_the_link_check_sees_links_and_skips_code() -> None:
    text = "\n".join(
        [
            "[a](one.md) ![b](img%5Bx%5D.svg#top) [c](https://x.org) [d](#here)",
            '`[not](a-link.md)` [[e]](<two words.md> "title")',
            "```bash",
            "[also not](inside-a-fence.md)",
            "```",
        ]
    )
    assert links(text) == [
        (1, "one.md"),
        (1, "img%5Bx%5D.svg#top"),
        (1, "https://x.org"),
        (1, "#here"),
        (2, "two words.md"),
    ]


def test_readme_is_a_five_minute_read() -> None:
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move detail to docs/"
    )

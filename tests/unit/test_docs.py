"""The docs hold together: every relative link and image in README.md and docs/**/*.md names a file
or folder that exists, and a heading there when it names one (`page.md#heading`, as GitHub makes
a heading's anchor); README.md stays a five-minute read and no page grows past one reader's
sitting. Pure: no network, no processes."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from tests.harness.processes import REPO

README_MAX_LINES = 170
PAGE_MAX_LINES = 600

# [text](target) and ![alt](target), with an optional "title"; the text may hold one level of
# brackets (an image inside a link), the target may be written <in angle brackets>
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
EXTERNAL = ("http://", "https://", "mailto:")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


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


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation (backticks, dots, slashes,
    parentheses) dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor outside fenced code blocks; a repeated one gets -1, -2, ..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not (match := HEADING.match(line)):
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    problems = []
    for number, target in links(page.read_text()):
        if target.startswith(EXTERNAL):
            continue
        path, _, fragment = unquote(target).partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            problems.append(
                f"{page.relative_to(REPO)}:{number}: link {target!r} names {resolved}, "
                "which does not exist"
            )
        elif (
            fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text())
        ):
            problems.append(
                f"{page.relative_to(REPO)}:{number}: link {target!r}: "
                f"{resolved.relative_to(REPO)} has no heading #{fragment}"
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


def test_the_anchor_check_reads_headings_as_github_does() -> None:
    text = "\n".join(
        [
            "# Credit",
            "## A local swarm: `scripts/devnet`",
            "## Proof of generation (client.node.proving, client.policy.proof)",
            "```bash",
            "# not a heading",
            "```",
            "### Notes",
            "### Notes",
        ]
    )
    assert anchors(text) == {
        "credit",
        "a-local-swarm-scriptsdevnet",
        "proof-of-generation-clientnodeproving-clientpolicyproof",
        "notes",
        "notes-1",
    }


def test_no_docs_page_is_longer_than_one_sitting() -> None:
    long = {
        str(page.relative_to(REPO)): n
        for page in pages()
        if (n := len(page.read_text().splitlines())) > PAGE_MAX_LINES
    }
    assert not long, f"pages over {PAGE_MAX_LINES} lines (split them by reader): {long}"

"""The user guide stays in step with the app: every relative link and image resolves, the command-line page names
every subcommand, and the screenshot script renders every workspace the guide shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from probescope.app.window.launch import WORKSPACE_NAMES
from probescope.main import COMMANDS

DOCS = Path(__file__).resolve().parent.parent / "docs"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_relative_links_and_images_resolve(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_guide_index_links_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not link {page.name}"


def test_cli_page_names_every_command():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for command in COMMANDS:
        assert re.search(rf"(`|probescope ){re.escape(command)}\b", text), f"docs/cli.md does not cover {command}"


def test_every_workspace_has_a_page_and_a_screenshot():
    script = (DOCS.parent / "scripts" / "screenshots.sh").read_text(encoding="utf-8")
    for workspace in WORKSPACE_NAMES:
        page = (DOCS / f"{workspace}.md").read_text(encoding="utf-8")
        assert f"(screenshots/{workspace}.png)" in page
        assert workspace in script

"""Every command a user is told to run works as written (issue 52): each shell and Python
block of the README and docs/*.md, in the page's order, in a fresh folder per page, as a
reader would type or save it.

The page's Python files (a block starting `# name.py`) are saved under their names, and
each is imported; any other Python block is run. None may use a name it never defines.
A shell block's lines are typed into one shell per page, so exports carry from one block
to the next as in a terminal, against the local stack the page itself starts with
`agentctl up` (on ports of its own: other stacks may run on this machine). A line that
fails is typed again a moment later, as a person does who waits for a run to reach its
approval, and fails the block if it still fails after RETRY_SECONDS.

A block that cannot run here says why in the page, in a `<!-- not run: why -->` comment
right before it: it is a skipped test, listed with its reason by `pytest -ra`, so nothing
is left out silently. A command outside an `sh` block would escape all this, so none may
be."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.starters.test_agentctl_e2e import stack_port

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README, GUIDE = ROOT / "README.md", ROOT / "docs" / "your-own-agent.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
NOT_RUN = "<!-- not run:"
FILE_NAME = re.compile(r"# (\w+)\.py\n")
RUN_KINDS = ("sh", "python")
# The first word of a line a reader is told to run (a transcript's `$ ...` is output).
COMMANDS = {
    "agentctl", "curl", "docker", "export", "kubectl", "make", "pip", "pytest", "python",
    "python3", "temporal",
}  # fmt: skip
RETRY_SECONDS = 60
BIN = Path(sys.executable).parent
# The settings that place the local stack: each page's stack on ports of its own.
STACK_PORTS = (
    "AGENT_TEMPORAL_PORT", "AGENT_TEMPORAL_UI_PORT", "AGENT_OFFLINE_MODEL_PORT",
    "AGENT_METRICS_PORT", "AGENT_CODEC_PORT", "AGENT_CONSOLE_PORT",
)  # fmt: skip


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    kind: str
    text: str
    not_run: str | None  # why, when the page says it is not run

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The module a Python block is saved as, from its first line."""
        named = FILE_NAME.match(self.text) if self.kind == "python" else None
        return named.group(1) if named else None


def not_run_reason(before: str) -> str | None:
    """The reason of a `<!-- not run: why -->` comment that ends right before a block."""
    _, opened, comment = before.rstrip().rpartition("<!--")
    said = " ".join(f"{opened}{comment}".split())
    if not said.startswith(NOT_RUN) or not said.endswith("-->"):
        return None
    return said.removeprefix(NOT_RUN).removesuffix("-->").strip() or None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for fence in FENCE.finditer(text):
        before = text[: fence.start()]
        kind, body = fence.group(1), fence.group(2)
        found.append(Block(page, before.count("\n") + 1, kind, body, not_run_reason(before)))
    return found


def section(page: Path, heading: str) -> list[Block]:
    """The blocks under a level-two heading, up to the next one."""
    text = page.read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    first, last = text[:start].count("\n"), text[: end if end != -1 else None].count("\n")
    return [b for b in blocks(page) if first < b.line <= last]


def lines_typed(block: Block) -> list[str]:
    """The shell lines of a block, continuations joined, blank lines and comments left out."""
    joined = block.text.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and line.lstrip()[0] != "#"]


# Each line of a shell block, as a person types it: again a moment later while it fails,
# and the block stops at a line that still fails. The exports are left in the file named
# by $1, for the next block of the page.
TYPING = """
typed() {
  local give_up=$((SECONDS + RETRY_SECONDS))
  until eval "$1"; do
    if ((SECONDS >= give_up)); then echo "failed as written: $1" >&2; exit 1; fi
    sleep 1
  done
}
"""


@dataclass
class Outcome:
    ok: bool
    said: str

    def report(self, block: Block) -> str:
        return f"{block.where} ({block.kind}) does not work as written:\n{self.said[-4000:]}"


@dataclass
class Page:
    """One page's blocks, run in order in a folder of its own, as one reader would."""

    page: Path
    folder: Path
    env: dict[str, str]
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    to_run: list[Block] = field(init=False)  # in the page's order; each taken as it runs

    def __post_init__(self) -> None:
        # The reader saves the page's files; a module may import one shown further down.
        for block in blocks(self.page):
            if block.file_name and not block.not_run:
                (self.folder / f"{block.file_name}.py").write_text(block.text)
        self.to_run = [b for b in blocks(self.page) if b.kind in RUN_KINDS and not b.not_run]

    def through(self, block: Block) -> Outcome:
        """The block's outcome, once it and every block before it on the page have run."""
        while block.line not in self.outcomes:
            following = self.to_run.pop(0)
            self.outcomes[following.line] = self.run(following)
        return self.outcomes[block.line]

    def run(self, block: Block) -> Outcome:
        if block.kind == "sh":
            return self.type_in(block)
        undefined = self.undefined_names(block)
        if undefined:
            return Outcome(False, undefined)
        if block.file_name:
            return self.call(sys.executable, "-c", f"import {block.file_name}")
        return self.call(sys.executable, "-", stdin=block.text)

    def undefined_names(self, block: Block) -> str:
        """What ruff says of names the block uses and never defines (F821), if anything."""
        checked = subprocess.run(
            [str(BIN / "ruff"), "check", "--isolated", "--no-cache", "--select", "F821",
             "--output-format", "concise", "--stdin-filename", f"{block.file_name}.py", "-"],
            input=block.text, capture_output=True, text=True, cwd=self.folder,
        )  # fmt: skip
        return "" if checked.returncode == 0 else checked.stdout + checked.stderr

    def type_in(self, block: Block) -> Outcome:
        state = self.folder.parent / f"{self.folder.name}.env"
        script = TYPING + "".join(f"typed {_quoted(line)}\n" for line in lines_typed(block))
        script += 'env -0 > "$1"\n'
        outcome = self.call("bash", "-c", script, "bash", str(state))
        if outcome.ok:
            pairs = (item.partition("=") for item in state.read_text().split("\0") if item)
            self.env = {k: v for k, _, v in pairs if k not in ("_", "SHLVL", "OLDPWD", "PWD")}
        return outcome

    def call(self, *argv: str, stdin: str | None = None) -> Outcome:
        env = self.env | {"RETRY_SECONDS": str(RETRY_SECONDS)}
        process = subprocess.Popen(
            argv,
            cwd=self.folder,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            said, _ = process.communicate(stdin, timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            said = f"{process.communicate()[0]}\n(still running after 240 s)"
        # Nothing it started stays behind (the stack's parts run in sessions of their own).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        return Outcome(process.returncode == 0, said)

    def close(self) -> None:
        """Stop the stack the page started (its parts run in sessions of their own)."""
        if (self.folder / ".data").exists():
            subprocess.run(
                [str(BIN / "agentctl"), "down"],
                cwd=self.folder,
                env=self.env,
                capture_output=True,
                timeout=120,
            )


def _quoted(line: str) -> str:
    return "'" + line.replace("'", "'\\''") + "'"


def reader_env(home: Path) -> dict[str, str]:
    """A reader's environment: this venv's commands first on the path, a home of its own,
    nothing of ours, Temporal's or OpenAI's set, and the local stack's ports."""
    ours = ("AGENT_", "OPENAI_", "TEMPORAL_", "VIRTUAL_ENV", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(home)}
    return env | {"COLUMNS": "200"} | {name: str(stack_port()) for name in STACK_PORTS}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, Page]]:
    opened: dict[Path, Page] = {}
    for page in PAGES:
        folder = tmp_path_factory.mktemp(page.stem)
        opened[page] = Page(page, folder, reader_env(tmp_path_factory.mktemp("home")))
    yield opened
    for each in opened.values():
        each.close()


def every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def test_every_block_runs_or_says_why_not():
    for page in PAGES:
        marked = [b for b in blocks(page) if b.not_run]
        stray = page.read_text().count(NOT_RUN) - len(marked)
        assert stray == 0, f"{page.name}: a `{NOT_RUN}` comment not right before a block"
    for block in every_block():
        if block.kind in RUN_KINDS:
            continue
        assert not block.not_run, f"{block.where}: only sh and python blocks are run"
        hidden = [line for line in lines_typed(block) if line.split()[0].split("/")[-1] in COMMANDS]
        assert not hidden, f"{block.where}: commands outside an sh block: {hidden}"
    # What the issue is about runs, whatever else may not.
    must_run = section(README, "## Your own agent") + section(GUIDE, "## 3. Run it for real")
    assert [b.kind for b in must_run] == ["python", "sh", "sh", "sh"]
    assert not [b.where for b in must_run if b.not_run]


def as_test(block: Block) -> Any:
    """A block to run, or one the page says is not run: a skip that names it and says why."""
    skip = [pytest.mark.skip(reason=f"{block.where}: {block.not_run}")] if block.not_run else []
    return pytest.param(block, id=block.where, marks=skip)


@pytest.mark.parametrize("block", [as_test(b) for b in every_block() if b.kind in RUN_KINDS])
def test_the_block_works_as_written(block: Block, pages: dict[Path, Page]):
    outcome = pages[block.page].through(block)
    assert outcome.ok, outcome.report(block)


def test_the_guides_refund_reaches_billing_once(pages: dict[Path, Page]):
    """The guide's commands did what it says: the lead's approval let the refund through,
    once, to the guide's billing database."""
    guide = pages[GUIDE]
    for block in guide.to_run[:]:
        guide.through(block)
    billing = guide.folder / ".data" / "billing.sqlite3"
    deadline = time.monotonic() + RETRY_SECONDS
    refunds = 0
    while not refunds and time.monotonic() < deadline:
        if billing.exists():
            with contextlib.closing(sqlite3.connect(billing)) as db:
                refunds = db.execute("SELECT COUNT(*) FROM refunds").fetchone()[0]
        time.sleep(0.5)
    assert refunds == 1, f"{refunds} refunds in {billing}"

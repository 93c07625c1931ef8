"""docs/reference/ is what the code prints (`make docs`, starters/reference.py): the lists
the docs would otherwise restate by hand (activities, event kinds, agentctl's flags,
extras, the workflow's handlers, the admission table, floors, settings, the state's
records) are printed from the code, and this test prints them again into memory and fails
while the folder differs: the diff CI shows."""

from __future__ import annotations

import difflib

from durable_agents.starters import reference


def test_docs_reference_is_what_the_code_prints():
    printed = reference.printed()
    kept = {path.name: path.read_text() for path in reference.REFERENCE.glob("*.md")}
    differ = sorted(
        name for name in printed.keys() | kept.keys() if printed.get(name) != kept.get(name)
    )
    if differ:
        first = differ[0]
        diff = difflib.unified_diff(
            kept.get(first, "").splitlines(), printed.get(first, "").splitlines(),
            f"docs/reference/{first}", "printed", lineterm="", n=0,
        )  # fmt: skip
        shown = "\n".join(list(diff)[:12])
        raise AssertionError(
            f"docs/reference/ differs from the code ({', '.join(differ)}): run make docs\n{shown}"
        )


def test_every_page_says_it_is_printed():
    for name, text in reference.printed().items():
        assert text.startswith(reference.HEADER), name
        assert "make docs" in text.splitlines()[0]


def test_the_index_names_every_page():
    index = reference.printed()["README.md"]
    for name in reference.PAGES:
        assert f"]({name})" in index, name

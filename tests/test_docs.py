"""The README stays true to the code it documents."""

from pathlib import Path

from orsbench.scenarios import SCENARIOS
from orsbench.servers.engine import DELIBERATE_DIFFERENCES

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_lists_every_deliberate_difference_exactly():
    block = README.split("<!-- differences:start -->")[1].split("<!-- differences:end -->")[0]
    listed = [line[2:] for line in block.strip().splitlines()]
    assert listed == list(DELIBERATE_DIFFERENCES)


def test_readme_quick_start_is_two_commands():
    quick = README.split("## Quick start")[1].split("```bash")[1].split("```")[0]
    assert [line for line in quick.strip().splitlines()] == [
        'pip install torch==2.13.0 && pip install -e ".[all]" && orsbench check --scenario echo',
        "pytest -n auto",
    ]


def test_readme_names_every_builtin_scenario():
    for name in ("echo", "task-tool", "sparse-reward", "slow"):
        assert name in SCENARIOS and f"`{name}`" in README


def test_readme_defect_list_is_the_conformance_suites():
    conformance = (Path(__file__).parent.parent / "docs" / "conformance.md").read_text()

    def block(text: str) -> str:
        return text.split("<!-- defects:start -->")[1].split("<!-- defects:end -->")[0]

    assert block(README) == block(conformance)


def test_readme_lists_every_implementation_difference_exactly():
    from orsbench.servers.implementations import differences_markdown as markdown

    block = README.split("<!-- impl-differences:start -->")[1].split("<!-- impl-differences:end -->")[0]
    assert block.strip() == markdown()


# -- counts in the docs come from the registries (issue 27: docs/checks.md said 73 checks, `check --list` had 88) --
def test_every_count_in_the_docs_is_the_registries():
    """Refresh with `python -m orsbench.reports.doc_counts` after adding a check, a case, a violation, ..."""
    from orsbench.reports import doc_counts

    assert doc_counts.stale() == []


def test_the_check_count_in_docs_checks_md_is_what_check_list_lists(capsys):
    import re

    from orsbench.cli import main

    text = (Path(__file__).parent.parent / "docs" / "checks.md").read_text()
    stated = int(re.search(r"grades what it saw with <!-- count:checks -->(\d+)<!-- /count --> named", text).group(1))
    assert main(["check", "--list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.split(" ")[0] in ("required", "recommended", "advisory")]
    assert stated == len(listed)


def test_a_stale_count_is_found_and_rewritten(tmp_path):
    """The control: the check above can fail, and the refresh fixes what it finds."""
    from orsbench.checks.collector import probe_names
    from orsbench.reports import doc_counts

    for document in doc_counts.DOCUMENTS:
        (tmp_path / document).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / document).write_text("")
    (tmp_path / "docs/checks.md").write_text("with <!-- count:checks -->73<!-- /count --> checks, <!-- count:probes words -->two<!-- /count --> probes")
    problems = doc_counts.stale(tmp_path)
    assert len(problems) == 2 and "checks says '73'" in problems[0]
    fixed = doc_counts.rendered((tmp_path / "docs/checks.md").read_text(), doc_counts.values())
    assert f"<!-- count:checks -->{doc_counts.values()['checks']}<!-- /count -->" in fixed and f"words -->{doc_counts.words(len(probe_names()))}<" in fixed
    assert doc_counts.words(61) == "sixty-one" and doc_counts.words(18) == "eighteen" and doc_counts.words(40) == "forty"

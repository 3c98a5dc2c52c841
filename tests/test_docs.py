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

"""The workflow that publishes the site (.github/workflows/pages.yml) cannot run here: these
tests read it. It must publish main's site with the permissions Pages needs, and every command
it runs must be a script of this repository that CI (.ci/run) or a test runs as well, so that
nothing is published by code that only GitHub ever executes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
ACTIONS = {"actions/checkout", "actions/setup-python", "actions/upload-pages-artifact", "actions/deploy-pages"}
SCRIPT = re.compile(r"bash (scripts/[\w.-]+\.sh)")  # a step's whole command: one script, no arguments


def workflow(path: Path = WORKFLOW) -> dict:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or "jobs" not in data:
        raise ValueError(f"{path} is not a workflow: it has no jobs")
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def steps(data: dict) -> list[tuple[str, dict]]:
    return [(name, step) for name, job in data["jobs"].items() for step in job["steps"]]


def uses(data: dict, action: str) -> list[tuple[str, dict]]:
    return [(job, step) for job, step in steps(data) if step.get("uses", "").split("@")[0] == action]


def exercised(script: str) -> bool:
    """Whether CI runs `script` (a line of .ci/run that is not a comment) or a test names it."""
    ci = [line.split("#")[0] for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    if any(re.search(rf"(^|\s)bash {re.escape(script)}(\s|$)", line) for line in ci):
        return True
    tests = [p for p in (ROOT / "tests").glob("test_*.py") if p.resolve() != Path(__file__).resolve()]
    return any(script in p.read_text(encoding="utf8") for p in tests)


def test_it_publishes_main_with_what_pages_needs():
    data = workflow()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert data["on"]["push"]["branches"] == [config["repository"]["branch"]] == ["main"]
    assert data["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert data["concurrency"] == {"group": "pages", "cancel-in-progress": False}  # never cut a deployment short
    ((build, upload),) = uses(data, "actions/upload-pages-artifact")
    assert upload["with"] == {"path": "_build/html"}  # where scripts/build_book.py writes the site
    ((deploy, _),) = uses(data, "actions/deploy-pages")
    job = data["jobs"][deploy]
    assert job["needs"] == build and job["environment"]["name"] == "github-pages"
    assert "steps.deployment.outputs.page_url" in job["environment"]["url"]
    ((_, python),) = uses(data, "actions/setup-python")
    assert python["with"]["python-version"] == "3.11"  # the pinned environment's
    assert [job for job, _ in uses(data, "actions/checkout")] == [build]


def test_every_step_is_a_known_action_or_a_tested_script_of_this_repository():
    data = workflow()
    scripts = []
    for job, step in steps(data):
        assert ("uses" in step) != ("run" in step), f"{job}: a step either uses an action or runs a script: {step}"
        if "uses" in step:
            action, _, version = step["uses"].partition("@")
            assert action in ACTIONS, f"{job}: {action} is not one of the actions this workflow is meant to use"
            assert re.fullmatch(r"v\d+", version), f"{job}: {step['uses']} is not pinned to a major version"
            continue
        command = step["run"].strip()
        match = SCRIPT.fullmatch(command)
        assert match, f"{job}: {command!r} is not `bash scripts/<name>.sh`: put the commands in a script CI runs"
        script = match.group(1)
        assert (ROOT / script).is_file(), f"{job}: {script} does not exist"
        assert exercised(script), f"{job}: neither .ci/run nor a test runs {script}"
        scripts.append(script)
    assert scripts == ["scripts/site.sh", "scripts/publish_colab.sh"]  # the site, then its Colab edition


def test_the_colab_edition_is_published_by_the_job_that_built_it():
    data = workflow()
    ((build, _),) = uses(data, "actions/upload-pages-artifact")
    assert data["jobs"][build]["permissions"] == {"contents": "write"}  # to push the edition's branch
    runs = [step["run"] for job, step in steps(data) if job == build and "run" in step]
    assert runs[-1].strip() == "bash scripts/publish_colab.sh"  # to origin's colab branch


def test_the_site_script_builds_from_stored_outputs_and_checks_what_it_built():
    text = (ROOT / "scripts" / "site.sh").read_text()
    commands = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "set -euo pipefail" in commands
    assert "bash scripts/setup.sh" in commands
    assert ".venv/bin/python scripts/build_book.py --stored-outputs" in commands  # no notebook runs
    # the site's browser tests, the phone layout's included, on the site it just built
    assert any("TOYBOOK_SITE=" in line and "tests/test_site.py" in line and "tests/test_figures.py" in line
               for line in commands)


def test_a_workflow_without_jobs_is_refused(tmp_path):
    bad = tmp_path / "pages.yml"
    bad.write_text("name: nothing\non: push\n")
    with pytest.raises(ValueError, match="no jobs"):
        workflow(bad)

"""The Colab edition (_ext/colab.py): every chapter as plain Markdown that Colab reads, with the
book's code, its install cell first and pinned; the Colab button that opens it; its publication
to a branch (scripts/publish_colab.sh); and one chapter run in a fresh environment with Colab's
package versions (only where TOYLIB_COLAB_ENV=1: it installs packages, so CI runs it apart)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from toylib import results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "_ext"))
import colab  # noqa: E402  (beside the book's Sphinx extension)

CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
SITE = colab.site_url(REPOSITORY)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
# what Colab could not read: a role, a directive's fence, a link to a page's source file
MYST = re.compile(r"\{[\w:.-]+\}`|^\s*(?:`{3,}|:{3,})\s*\{|\]\((?!https?:|#|attachment:|mailto:)[^)\s]*\.(?:ipynb|md)\b",
                  re.M)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def book(name: str) -> dict:
    return json.loads((ROOT / "book" / f"{name}.ipynb").read_text())


def titles() -> dict[str, str]:
    return colab.book_titles(ROOT, [f"book/{p.stem}" for p in (ROOT / "book").iterdir() if p.suffix in (".ipynb", ".md")])


def edition_of(nb: dict, doc: str = "book/page") -> dict:
    return colab.edition(nb, doc, COMMIT, SITE, titles(), results.FOLDER)


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_chapter_s_edition_is_plain_markdown_with_the_book_s_code(name):
    nb = book(name)
    ed = edition_of(nb, f"book/{name}")
    markdown = [c for c in ed["cells"] if c["cell_type"] == "markdown"]
    for cell in markdown:
        left = MYST.findall(cell["source"])
        assert not left, f"{name}: MyST left for Colab: {left} in\n{cell['source'][:300]}"
        assert not colab.SITE_ONLY.search(cell["source"]), f"{name}: the site's launch button, named for Colab"
        shown = set(re.findall(r"\(attachment:([^)]+)\)", cell["source"]))
        assert shown == set(cell.get("attachments", {})), f"{name}: attachments {shown} against {cell.get('attachments')}"
    # the install cell first, pinned; then every code cell of the book, as it is, in its order
    install, *rest = ed["cells"]
    assert install["cell_type"] == "code" and f'COMMIT = "{COMMIT}"' in install["source"]
    assert 'pip install -q "toylib @ git+{REPO}@{COMMIT}"' in install["source"]
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["source"] for c in ed["cells"] if c["cell_type"] == "code"][1:] == [s for s in code if colab.INSTALL not in s]
    assert len(markdown) == sum(c["cell_type"] == "markdown" for c in nb["cells"])
    # the opening picture travels with the notebook
    if any("```{hero}" in "".join(c["source"]) or "{glue:figure}" in "".join(c["source"]) for c in nb["cells"]):
        assert any(c.get("attachments") for c in markdown), name
    assert len(json.dumps(ed)) < 5_000_000


def page(markdown: str, glue: dict | None = None) -> dict:
    """A notebook of one markdown cell, an install cell and a cell that glued `glue`."""
    outputs = [{"output_type": "display_data", "metadata": {"scrapbook": {"name": k, "mime_prefix": "application/x/"}},
                "data": {f"application/x/{mime}": v for mime, v in data.items()}} for k, data in (glue or {}).items()]
    install = f'REPO = "{REPOSITORY}"\ntry:\n    import toylib\nexcept ImportError:\n    %{colab.INSTALL}\n'
    return {"cells": [{"cell_type": "markdown", "metadata": {}, "source": markdown},
                      {"cell_type": "code", "metadata": {}, "source": install, "outputs": [], "execution_count": 1},
                      {"cell_type": "code", "metadata": {}, "source": "glue()", "outputs": outputs, "execution_count": 2}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_glued_and_measured_numbers_are_written_in_and_links_go_to_the_site():
    source = ("# A page\n\nIt met {glue:text}`share` ({glue:text}`ratio:.1f` times), over seeds "
              "{bench}`life:ordinary:seeds` {bench}`life:ordinary:count`; the post said {post}`90.7 %`.\n"
              "See [attention](how.ipynb#attention-a-soft-look-up), {doc}`how`, {doc}`the results <results>`, "
              "[a site](https://example.org/x.ipynb) and [below](#a-page).\n\n"
              "```{hero} page.ipynb::pic\n:alt: A picture.\n:name: fig-x\n\nIts caption, {glue:text}`share`.\n```\n\n"
              "```python\nx = '{glue:text}`share`'  # code stays as written\n```\n\n"
              "```{dropdown} Reproduce these numbers\nRun `make` ({glue:text}`share`).\n```")
    ed = edition_of(page(source, {"share": {"text/plain": "'99.5 %'"}, "ratio": {"text/plain": "2.3456"},
                                  "pic": {"image/png": PNG, "text/plain": "<figure>"}}))
    text = ed["cells"][1]["source"]
    assert ed["cells"][0]["cell_type"] == "code"  # the install cell first
    record = results.find("life", "ordinary")
    assert (f"It met 99.5 % (2.3 times), over seeds {results.seeds_text(record)} "
            f"{results.fraction(*results.count(record))}; the post said 90.7 %.") in text
    assert f"[attention]({SITE}book/how.html#attention-a-soft-look-up)" in text
    assert f"[How transformers work]({SITE}book/how.html)" in text and f"[the results]({SITE}book/results.html)" in text
    assert "[a site](https://example.org/x.ipynb)" in text and "[below](#a-page)" in text
    assert "![A picture.](attachment:pic.png)\n\nIts caption, 99.5 %." in text
    assert ed["cells"][1]["attachments"] == {"pic.png": {"image/png": PNG}}
    assert "x = '{glue:text}`share`'  # code stays as written" in text
    assert text.endswith("<details>\n<summary>Reproduce these numbers</summary>\n\nRun `make` (99.5 %).\n\n</details>")


def test_the_edition_sends_no_reader_to_the_site_s_rocket_button():
    """Every chapter's "Reproduce these numbers" says how to run the page "here, or in Colab with
    the rocket button above": in Colab, there is no such button, and the reader is there already."""
    source = ("```{dropdown} Reproduce these numbers\nThis page is a notebook: run it from the top (here, or in "
              "Colab with the rocket button\nabove) and every number on it is computed again.\n```")
    text = edition_of(page(source))["cells"][1]["source"]
    assert ("This page is a notebook: run it from the top (Colab's menu: Runtime, then Run all) and every number "
            "on it is computed again.") in text
    assert "rocket" not in text.lower()
    code = "```python\n# the rocket button above\n```"  # code is the book's, as written
    assert edition_of(page(code))["cells"][1]["source"] == code


@pytest.mark.parametrize("source, says", [
    ("Open it in Colab with the Rocket icon.", "site's Rocket button"),
    ("a {ref}`fig-x` reference", "role {ref}"),
    ("```{note}\nA note.\n```", "directive {note}"),
    ("{glue:text}`missing`", "no text named 'missing'"),
    ("{glue:text}`other.ipynb::key`", "another page"),
    ("```{hero} page.ipynb::nothing\n:alt: x\n```", "no picture named 'nothing'"),
    ("{doc}`nowhere`", "no page 'book/nowhere'"),
    ("```{hero} page.ipynb::pic\n:alt: x\n", "never closes"),
])
def test_markdown_with_no_plain_form_stops_the_edition_and_says_what(source, says):
    with pytest.raises(colab.EditionError, match=re.escape(says)):
        edition_of(page(source))


def test_a_chapter_without_its_install_cell_is_refused():
    nb = page("# A page")
    del nb["cells"][1]
    with pytest.raises(colab.EditionError, match="no install cell"):
        edition_of(nb)


def test_the_site_address_is_github_pages_own():
    assert colab.site_url("https://github.com/toy-transformers/toy-transformers") == \
        "https://toy-transformers.github.io/toy-transformers/"
    with pytest.raises(ValueError, match="github.com"):
        colab.site_url("https://gitlab.com/a/b")


def test_the_colab_button_opens_the_edition_s_branch():
    class App:
        class config:
            html_theme_options = {"repository_url": REPOSITORY, "repository_branch": "main"}

    url = "https://colab.research.google.com/github/toy-transformers/toy-transformers/blob/main/book/life.ipynb"
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [{"text": "Colab", "url": url}]}]}
    colab.colab_button(App, "book/life", "page.html", context, None)
    assert context["header_buttons"][0]["buttons"][0]["url"] == url.replace("/blob/main/", f"/blob/{colab.COLAB_BRANCH}/")


def git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_publishing_puts_the_edition_on_its_own_branch_and_leaves_the_checkout_alone(tmp_path):
    edition = tmp_path / "edition"
    (edition / "book").mkdir(parents=True)
    (edition / "book" / "life.ipynb").write_text("{}\n")
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote))
    before = git("status", "--porcelain")
    env = {**os.environ, "EDITION": str(edition)}
    for _ in range(2):  # published twice: the branch still holds one commit
        subprocess.run(["bash", "scripts/publish_colab.sh", str(remote), "colab"], cwd=ROOT, env=env, check=True,
                       capture_output=True)
    assert git("ls-tree", "-r", "--name-only", "colab", cwd=remote) == "book/life.ipynb"
    assert git("log", "--format=%s", "colab", cwd=remote) == f"The Colab edition of {git('rev-parse', 'HEAD')}"
    assert git("status", "--porcelain") == before
    empty = subprocess.run(["bash", "scripts/publish_colab.sh", str(remote)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "EDITION": str(tmp_path / "none")})
    assert empty.returncode == 1 and "build the book first" in empty.stderr


# Colab's versions where this machine can install them; torch is the pinned CPU build (Colab's
# 2.11 comes from PyPI as a CUDA build of several GB)
COLAB_PACKAGES = ["numpy==2.1.3", "matplotlib==3.10.0", "ipywidgets==7.7.1", "torch==2.13.0", "ipykernel", "nbclient"]


@pytest.mark.skipif(os.environ.get("TOYLIB_COLAB_ENV") != "1",
                    reason="installs a fresh environment (a few minutes): TOYLIB_COLAB_ENV=1, as .ci/run sets it")
def test_a_chapter_s_edition_runs_in_a_fresh_environment_with_colab_s_versions(tmp_path):
    """The primer's edition, executed in a new virtual environment holding Colab's package
    versions and no toylib: its install cell installs the library from this repository at
    HEAD, as `pip install` of the git URL does on Colab."""
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *COLAB_PACKAGES], check=True)
    built = os.environ.get("TOYLIB_COLAB_EDITION")  # the edition a build wrote (.ci/run), else made here
    ed = (json.loads((Path(built) / "book" / "how.ipynb").read_text()) if built else
          colab.edition(book("how"), "book/how", git("rev-parse", "HEAD"), SITE, titles(), results.FOLDER))
    assert f'COMMIT = "{git("rev-parse", "HEAD")}"' in ed["cells"][0]["source"]
    install = ed["cells"][0]
    install["source"] = re.sub(r'^REPO = .*$', f'REPO = "file://localhost{ROOT}"', install["source"], count=1, flags=re.M)
    path = tmp_path / "how.ipynb"
    path.write_text(json.dumps(ed))
    run = subprocess.run([env / "bin" / "jupyter-execute", "--inplace", "--timeout=600", str(path)], cwd=tmp_path,
                         capture_output=True, text=True, env={**os.environ, "TOYLIB_DEVICE": "cpu",
                                                              "JUPYTER_PATH": str(env / "share" / "jupyter")})
    assert run.returncode == 0, run.stderr[-3000:]
    ran = json.loads(path.read_text())
    errors = [o for c in ran["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    versions = subprocess.run([python, "-c", "import numpy, matplotlib, ipywidgets, toylib; print(numpy.__version__, "
                               "matplotlib.__version__, ipywidgets.__version__, toylib.__file__)"],
                              cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    assert versions[:3] == ["2.1.3", "3.10.0", "7.7.1"] and versions[3].startswith(str(env))

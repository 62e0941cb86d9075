"""
The documentation site: ``mkdocs build --strict`` passes (no broken link, no missing API entry), every
public name has an API entry, every page is in the navigation, and every ```python block of
``docs/*.md`` runs.

Not-run convention: a block directly preceded by ``<!-- docs-test: skip (why) -->`` is not run; the
reason is required, and the convention is meant for long commands only. Pages are run block by block
in one namespace per page (like a reader following the page), in a temporary folder.
"""

import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
SKIP_MARKER = re.compile(r"^<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)")
PUBLIC_PACKAGES = ("sb3_pref", "sb3_pref.envs", "sb3_pref.human", "sb3_pref.experiments", "sb3_pref.rl2", "sb3_pref.ad")


def python_blocks(path: str) -> list[tuple[int, str, str]]:
    """``(line, code, skip_reason)`` of every ```python block of a Markdown file (reason '' when run)."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start, language = index, match.group("lang")
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if language == "python":
            marker = SKIP_MARKER.match(lines[start - 1]) if start > 0 else None
            if marker is not None and not marker.group("reason").strip():
                raise AssertionError(f"{path}:{start}: a docs-test skip marker needs a reason")
            blocks.append((start + 1, "\n".join(lines[start + 1 : end]), marker.group("reason").strip() if marker else ""))
        index = end + 1
    return blocks


def doc_pages() -> list[str]:
    return sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))


def test_block_extraction_and_skip_marker(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```python\nx = 1\n```\n<!-- docs-test: skip (trains for hours) -->\n```python\nlong()\n```\n"
        "```bash\nls\n```\n```python\ny = x + 1\n```\n"
    )
    blocks = python_blocks(str(page))
    assert [(code, reason) for _, code, reason in blocks] == [("x = 1", ""), ("long()", "trains for hours"), ("y = x + 1", "")]
    page.write_text("<!-- docs-test: skip () -->\n```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="needs a reason"):
        python_blocks(str(page))


@pytest.mark.parametrize("page", [p for p in doc_pages() if python_blocks(os.path.join(DOCS, p))])
def test_docs_code_samples_run(page, tmp_path, monkeypatch):
    blocks = python_blocks(os.path.join(DOCS, page))
    if all(skip_reason for _, _, skip_reason in blocks):
        pytest.skip("not run: " + "; ".join(sorted({reason for _, _, reason in blocks})))
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{page[:-3]}"}
    for line, code, skip_reason in blocks:
        if skip_reason:
            continue
        try:
            exec(compile(code, f"{page}:{line}", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"the sample at docs/{page} line {line} fails: {error!r}") from error


def test_every_page_is_in_the_navigation():
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(REPO, "mkdocs.yml")) as handle:
        nav = yaml.safe_load(handle)["nav"]

    def entries(items):
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from entries(value) if isinstance(value, list) else [value]

    listed = set(entries(nav))
    missing = [page for page in doc_pages() if page not in listed]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"
    for entry in listed:
        assert os.path.exists(os.path.join(DOCS, entry)), f"nav entry {entry} has no file"


def _documented_identifiers() -> set[str]:
    found = set()
    for page in doc_pages():
        with open(os.path.join(DOCS, page), encoding="utf-8") as handle:
            found.update(re.findall(r"^:::\s*([\w.]+)", handle.read(), flags=re.MULTILINE))
    return found


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_api_reference_covers_public_names(package):
    try:
        module = importlib.import_module(package)
    except ImportError as error:
        pytest.skip(f"{package} does not import here: {error}")
    documented = _documented_identifiers()
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants (QUERY_METHODS, __version__) are described in the text
        home = obj.__module__
        candidates = {f"{package}.{name}", f"{home}.{obj.__qualname__}", home}
        if not candidates & documented:
            missing.append(f"{package}.{name} ({home}.{obj.__qualname__})")
    assert not missing, f"public names without an API entry (add ::: lines to docs/api-*.md): {missing}"


def test_mkdocs_build_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[docs]')")
    shutil.copy(os.path.join(REPO, "mkdocs.yml"), tmp_path / "mkdocs.yml")
    for folder in ("docs", "sb3_pref", "benchmarks"):
        os.symlink(os.path.join(REPO, folder), tmp_path / folder)
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    for page in ("index.html", "api-experiments/index.html", "howto-grid/index.html", "reports/overhead/index.html"):
        assert (tmp_path / "site" / page).exists(), page
    # Docstring roles become links (docs/hooks/sphinx_roles.py), never the literal ":class:" text.
    api = (tmp_path / "site" / "api-core" / "index.html").read_text(encoding="utf-8")
    assert not re.search(r":(class|func|meth):<code>", api)
    assert 'href="#sb3_pref.core.reward_model.RewardModel"' in api
    # Sphinx's literal-block marker prints as one colon, as Sphinx prints it, not as "work::".
    algorithms = (tmp_path / "site" / "api-algorithms" / "index.html").read_text(encoding="utf-8")
    assert "work::" not in algorithms and "Both call shapes work:" in algorithms
    # The ecosystem pages are built, and every committed report is in the navigation.
    for page in ("installation", "can-i-use", "rl-zoo", "ecosystem", "changelog", "citing", "contributing"):
        assert (tmp_path / "site" / page / "index.html").exists(), page
    reports = sorted(
        os.path.relpath(os.path.join(folder, name), os.path.join(REPO, "benchmarks"))[:-3]
        for folder, _, names in os.walk(os.path.join(REPO, "benchmarks"))
        for name in names
        if name.endswith(".md")
    )
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    for report in reports:
        link = ("reports/" + report.replace(os.sep, "/") + "/").replace("README/", "")  # README.md is its folder's index
        assert f'href="{link}"' in index, f"{link} is not in the navigation"


def test_the_feedback_plan_figure_is_drawn_by_the_planner(tmp_path):
    # docs/images/feedback_plan.png shows what learn() will ask: the script must keep running on the planner of today
    pytest.importorskip("matplotlib")
    path = os.path.join(DOCS, "images", "feedback_plan.py")
    spec = importlib.util.spec_from_file_location("feedback_plan_figure", path)
    figure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figure)
    demo = figure.plan_of(*figure.CASES[0][1:])
    assert (demo.unsuper_step, demo.rounds()[0], demo.round_size, demo.rounds()[-1]) == (8000, (8000, 200), 25, (40000, 25))
    figure.draw(str(tmp_path / "plan.png"))
    assert os.path.getsize(tmp_path / "plan.png") > 20_000

"""
MkDocs hook: publishes the committed reports under ``benchmarks/`` (Markdown pages with their
figures and tables; ``README.md`` becomes the index) as ``reports/...`` in the site, and lists them
on ``benchmarks.md`` where it says ``<!-- benchmark-reports -->``. A report added to ``benchmarks/``
appears without a docs edit, and ``mkdocs build --strict`` checks its links like any other page.
The reports are also listed in the navigation, under the Benchmarks entry.
"""

import os

from mkdocs.structure.files import File

SUFFIXES = (".md", ".png", ".svg", ".jpg", ".csv", ".json")
MARKER = "<!-- benchmark-reports -->"


def _reports(config):
    root = os.path.join(os.path.dirname(config.config_file_path), "benchmarks")
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith((".", "__")))
        for name in sorted(names):
            if name.endswith(SUFFIXES):
                path = os.path.join(folder, name)
                yield path, "reports/" + os.path.relpath(path, root).replace(os.sep, "/")


def _title(path):
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("# "):
                return line[2:].strip()
    return os.path.splitext(os.path.basename(path))[0]


def on_config(config):
    # "Benchmarks: benchmarks.md" becomes a section: the page, then one entry per committed report.
    reports = [{_title(path): uri} for path, uri in _reports(config) if uri.endswith(".md")]
    for index, item in enumerate(config["nav"] or []):
        if isinstance(item, dict) and list(item.values()) == ["benchmarks.md"] and reports:
            title = next(iter(item))
            config["nav"][index] = {title: [{"Overview": "benchmarks.md"}, *reports]}
    return config


def on_files(files, config):
    for path, uri in _reports(config):
        files.append(File.generated(config, uri, abs_src_path=path))
    return files


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    items = [f"- [{_title(path)}]({uri})" for path, uri in _reports(config) if uri.endswith(".md")]
    return markdown.replace(MARKER, "\n".join(items) or "No reports are committed yet.")

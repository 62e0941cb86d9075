"""
MkDocs hook: turns the Sphinx roles of our docstrings (``:class:`~a.b.C```, ``:func:`f```, ...) into
cross-references. mkdocstrings renders them as the literal text ``:class:`` followed by code; here each
becomes an optional autoref, which mkdocs-autorefs links when the target has an API entry and leaves as
plain code otherwise. A paragraph that ends in Sphinx's literal-block marker (``... work::`` before an
indented example) ends in one colon, as Sphinx prints it. Short names (``:class:`RewardModel```) are
looked up among the public names of the package's modules, so docstrings can stay as readable as they
are in the source.

The algorithms' docstrings get their preference options' ``:param`` lines when the package is imported
(``sb3_pref.common.options.document_options``), which mkdocstrings, reading the source, does not see: where a
page says ``<!-- preference-options -->``, this hook writes the table of the declared options instead.
"""

import importlib
import inspect
import pkgutil
import re

LITERAL_MARKER = re.compile(r"(\S)::</p>")
ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc):<code>(~?)([\w.]+)</code>")


def _public_names() -> dict[str, str]:
    """Short name -> full dotted path, for each public class and function defined in ``sb3_pref``."""
    import sb3_pref

    homes: dict[str, set[str]] = {}
    for info in pkgutil.walk_packages(sb3_pref.__path__, "sb3_pref."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed: its names stay plain code
            continue
        for name, obj in vars(module).items():
            if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == info.name:
                homes.setdefault(name, set()).add(f"{info.name}.{obj.__qualname__}")
    # A short name defined in two modules is ambiguous: it stays plain code.
    return {name: paths.pop() for name, paths in homes.items() if len(paths) == 1}


def on_config(config):
    global _NAMES
    _NAMES = _public_names()
    return config


_NAMES: dict[str, str] = {}
OPTIONS_MARKER = "<!-- preference-options -->"


def _options_table() -> str:
    """The declared preference options as a Markdown table: name, type, defaults, algorithms, meaning."""
    from sb3_pref.common.options import OFF_POLICY, ON_POLICY, PREFERENCE_OPTIONS

    rows = ["| option | type | default | `SAC_REWARD` default | description |", "|---|---|---|---|---|"]
    for option in PREFERENCE_OPTIONS:
        kind = inspect.formatannotation(option.annotation).replace("sb3_pref.common.", "").replace("|", "or")
        on = f"`{option.default!r}`" if ON_POLICY in option.families else "(SAC_REWARD only)"
        off = f"`{option.default_for(OFF_POLICY)!r}`" if OFF_POLICY in option.families else "(not taken)"
        rows.append(f"| `{option.name}` | `{kind}` | {on} | {off} | {option.doc.replace('|', 'or')} |")
    return "\n".join(rows)


def on_page_markdown(markdown, page, config, files):
    return markdown.replace(OPTIONS_MARKER, _options_table()) if OPTIONS_MARKER in markdown else markdown


def on_page_content(html, page, config, files):
    def link(match):
        short, target = match.group(1), match.group(2)
        identifier = _NAMES.get(target, target)
        title = target.rsplit(".", 1)[-1] if short else target
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'

    return LITERAL_MARKER.sub(r"\1:</p>", ROLE.sub(link, html))

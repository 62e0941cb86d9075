"""The labelling page: one self-contained HTML file (``static/page.html``: no build step, no external assets)."""

import html
import os
from functools import lru_cache

_PAGE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static", "page.html")


@lru_cache(maxsize=1)
def _template() -> str:
    with open(_PAGE_PATH, encoding="utf-8") as handle:
        return handle.read()


def render_page(nonce: str, instruction: str) -> str:
    """
    :param nonce: the per-response CSP nonce allowing the page's own script and style
    :param instruction: what the person should prefer (HTML-escaped here)
    :return: the page
    """
    text = instruction or "Watch both clips, then pick the one you like better."
    return _template().replace("__NONCE__", nonce).replace("__INSTRUCTION__", html.escape(text))

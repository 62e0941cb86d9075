"""
The labelling page: one self-contained HTML file, ``static/page.html`` (no build step, no external assets:
the strict Content-Security-Policy allows only its nonce'd inline style and scripts; one file, so that the
package data that ships it is ``human/static/*.html``), and the short page shown to someone who opens the
link without its token.
"""

import html
import os
from functools import lru_cache

_PAGE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static", "page.html")


@lru_cache(maxsize=1)
def _template() -> str:
    with open(_PAGE_PATH, encoding="utf-8") as handle:
        return handle.read()


#: What the page says about pairs that look alike when the run's author said nothing: about a third of the pairs a
#: person met were such pairs, and all of their disagreements with the measured behaviour were among them.
WHEN_ALIKE = (
    "If the two clips look alike for this, answer \u201cCan't tell\u201d: a guess teaches noise. Answer \u201cEqually "
    "good\u201d only when both clearly show it as much."
)


def render_page(nonce: str, instruction: str, when_alike: str = "") -> str:
    """
    :param nonce: the per-response CSP nonce allowing the page's own script and style
    :param instruction: what the person should prefer (HTML-escaped here)
    :param when_alike: what to answer when both clips look alike (the run's own criterion); empty: ``WHEN_ALIKE``
    :return: the page
    """
    text = instruction or "Watch both clips, then pick the one you like better."
    return (
        _template()
        .replace("__NONCE__", nonce)
        .replace("__INSTRUCTION__", html.escape(text))
        .replace("__WHEN_ALIKE__", html.escape(when_alike or WHEN_ALIKE))
    )


def render_token_page(nonce: str, wrong: bool) -> str:
    """
    What a browser shows for the page's address without its token (or with a wrong one): a sentence
    saying which link to open, rather than the API's JSON error.

    :param nonce: the per-response CSP nonce allowing the page's style
    :param wrong: a token was given but is not this run's
    """
    problem = "This link's access token is wrong" if wrong else "This link is missing its access token"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>The labelling page needs its full link</title>
<style nonce="{nonce}">body {{ font-family: system-ui, sans-serif; max-width: 40em; margin: 3em auto; padding: 0 1em;
color: #1d2330; line-height: 1.45; }} code {{ background: #eef1f5; padding: 0 4px; border-radius: 4px; }}</style>
</head><body>
<h1>The labelling page needs its full link</h1>
<p>{problem}. Open the whole address the training script printed: it ends in <code>?token=</code> followed by a
long random code, e.g. <code>http://127.0.0.1:8000/?token=Xy3...</code>. The token keeps other people and other
web pages from answering in your place.</p>
<p>Lost the address? It is printed again by <code>python -m sb3_pref.human serve RUN_DIR</code>, which serves the
pairs still waiting in a run folder.</p>
</body></html>
"""

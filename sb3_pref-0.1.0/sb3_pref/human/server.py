"""
The labelling web page: a small Flask app served from a background thread of the training process.

Every request must carry the run's random access token (``?token=...`` or an ``X-Feedback-Token``
header); answers are accepted only for queries of the run's :class:`LabelStore`, media only for the
clips of those queries, and every malformed request gets a 4xx JSON error. Nothing a request does
can raise into the training thread: requests run in the server's own threads.
"""

import hmac
import ipaddress
import os
import re
import secrets
import threading
import warnings
from typing import Any, Callable, Optional, Union

try:
    from flask import Flask, Response, jsonify, request, send_from_directory
    from werkzeug.exceptions import HTTPException
    from werkzeug.serving import WSGIRequestHandler, make_server
except ModuleNotFoundError as error:  # pragma: no cover (the human extra installs Flask)
    raise ImportError(f"the labelling page needs Flask ({error}): pip install 'sb3_pref[human]'") from error

from sb3_pref.human.page import render_page
from sb3_pref.human.store import CHOICE_LABELS, AnswerConflictError, LabelStore, UnknownQueryError

TOKEN_HEADER = "X-Feedback-Token"
# Query ids and media names are plain: anything else is refused before touching the disk or the database.
_MEDIA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\.(mp4|webm|gif)$")
_MEDIA_TYPES = {"mp4": "video/mp4", "webm": "video/webm", "gif": "image/gif"}

StatusFn = Callable[[], dict[str, Any]]


class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not print an access line (with the token in it) for every poll."""

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        pass


def _bad_request(message: str, code: int = 400) -> tuple[Response, int]:
    return jsonify(error=message), code


def _parse_query_id(value: Any) -> Optional[int]:
    # bool is an int subclass: {"query_id": true} must not mean query 1.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        return None
    return value


class _Views:
    """The app's request handlers, sharing the store, the token and the training side's callbacks."""

    def __init__(
        self,
        store: LabelStore,
        media_dir: str,
        token: str,
        status: Optional[StatusFn],
        on_answer: Optional[Callable[[int, str], None]],
        instruction: str,
    ) -> None:
        self.store, self.media_dir, self.token = store, os.path.abspath(media_dir), token
        self.status, self.on_answer, self.instruction = status, on_answer, instruction

    def check_token(self) -> Optional[tuple[Response, int]]:
        given = request.args.get("token") or request.headers.get(TOKEN_HEADER)
        if not given:
            return _bad_request("missing access token: open the URL printed by the training script", 401)
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return _bad_request("wrong access token: open the URL printed by the training script", 403)
        return None

    @staticmethod
    def security_headers(response: Response) -> Response:
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"  # the token is in the URL
        response.headers["X-Frame-Options"] = "DENY"
        if "Cache-Control" not in response.headers or request.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @staticmethod
    def http_error(error: HTTPException) -> tuple[Response, int]:
        return _bad_request(error.description or error.name, error.code or 500)

    @staticmethod
    def unexpected_error(error: Exception) -> tuple[Response, int]:
        warnings.warn(f"labelling server: {type(error).__name__}: {error}")
        return _bad_request("internal error; the answer was not stored", 500)

    def page(self) -> Response:
        nonce = secrets.token_urlsafe(16)
        response = Response(render_page(nonce, self.instruction), mimetype="text/html")
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; media-src 'self'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return response

    def next_query(self) -> Response:
        pending = self.store.pending(limit=1)
        query = None
        if pending:
            row = pending[0]
            # Clip URLs carry the token: a video element cannot send headers.
            left, right = (f"media/{row[key]}?token={self.token}" for key in ("video_0", "video_1"))
            query = {"id": row["id"], "round": row["round"], "left": left, "right": right}
        return jsonify(query=query, counts=self.store.counts(), status=self.status() if self.status is not None else {})

    def answer(self) -> tuple[Response, int]:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return _bad_request('expected a JSON object {"query_id": <int>, "choice": "left|right|equal|skip"}')
        query_id = _parse_query_id(body.get("query_id"))
        choice = body.get("choice")
        if query_id is None:
            return _bad_request("query_id must be a positive 64-bit integer")
        if not isinstance(choice, str) or choice not in CHOICE_LABELS:
            return _bad_request(f"choice must be one of {', '.join(CHOICE_LABELS)}")
        try:
            new = self.store.record_answer(query_id, choice)
        except UnknownQueryError:
            return _bad_request(f"no query {query_id} was issued by this run", 404)
        except AnswerConflictError as error:
            return _bad_request(f"{error}; the first answer stands", 409)
        if new and self.on_answer is not None:
            self.on_answer(query_id, choice)
        return jsonify(stored=new, query_id=query_id, choice=choice, counts=self.store.counts()), 200

    def shown(self) -> tuple[Response, int]:
        body = request.get_json(silent=True)
        query_id = _parse_query_id(body.get("query_id")) if isinstance(body, dict) else None
        if query_id is None:
            return _bad_request("expected a JSON object with a positive 64-bit integer query_id")
        if not self.store.mark_shown(query_id):
            return _bad_request(f"no query {query_id} was issued by this run", 404)
        return jsonify(ok=True), 200

    def media(self, name: str) -> Union[Response, tuple[Response, int]]:
        match = _MEDIA_NAME.match(name)
        if match is None or not self.store.is_media(name):
            return _bad_request("no such clip", 404)
        response = send_from_directory(self.media_dir, name, mimetype=_MEDIA_TYPES[match.group(1)], conditional=True)
        # A clip never changes once written: let the browser keep it while the page is open.
        response.headers["Cache-Control"] = "private, max-age=3600"
        return response


def create_app(
    store: LabelStore,
    media_dir: str,
    token: str,
    status: Optional[StatusFn] = None,
    on_answer: Optional[Callable[[int, str], None]] = None,
    instruction: str = "",
) -> Flask:
    """
    :param store: where queries are read and answers written
    :param media_dir: the folder holding the clips
    :param token: the access token every request must carry
    :param status: returns the training side's status for the page (mode, round, progress...)
    :param on_answer: called with ``(query_id, choice)`` after a new answer is stored
    :param instruction: what the person should prefer, shown above the clips
    :return: the Flask app
    """
    views = _Views(store, media_dir, token, status, on_answer, instruction)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 4096  # answers are tiny; anything larger is refused with 413
    app.before_request(views.check_token)
    app.after_request(views.security_headers)
    app.register_error_handler(HTTPException, views.http_error)
    app.register_error_handler(Exception, views.unexpected_error)
    app.add_url_rule("/", "page", views.page, methods=["GET"])
    app.add_url_rule("/api/next", "next", views.next_query, methods=["GET"])
    app.add_url_rule("/api/answer", "answer", views.answer, methods=["POST"])
    app.add_url_rule("/api/shown", "shown", views.shown, methods=["POST"])
    app.add_url_rule("/media/<name>", "media", views.media, methods=["GET"])
    return app


def is_loopback(host: str) -> bool:
    """:return: True if ``host`` only accepts connections from this machine"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FeedbackServer:
    """
    The labelling page on a background thread (werkzeug's threaded server).

    :param store: the run's label store
    :param media_dir: folder of the clips
    :param host: interface to bind; the loopback default keeps the page on this machine (use an SSH
        tunnel, ``ssh -L PORT:127.0.0.1:PORT host``, to label from another machine)
    :param port: TCP port; 0 picks a free one
    :param token: access token; None draws a random one
    :param status: returns the training side's status for the page
    :param on_answer: called with ``(query_id, choice)`` after each new answer
    :param instruction: what the person should prefer
    """

    def __init__(
        self,
        store: LabelStore,
        media_dir: str,
        host: str = "127.0.0.1",
        port: int = 0,
        token: Optional[str] = None,
        status: Optional[StatusFn] = None,
        on_answer: Optional[Callable[[int, str], None]] = None,
        instruction: str = "",
    ) -> None:
        if not is_loopback(host):
            warnings.warn(
                f"the labelling page binds {host}: anyone who can reach this machine and knows the token can answer. "
                "Prefer the default 127.0.0.1 with an SSH tunnel."
            )
        self.token = token or secrets.token_urlsafe(24)
        self.app = create_app(store, media_dir, self.token, status=status, on_answer=on_answer, instruction=instruction)
        self._server = make_server(host, port, self.app, threaded=True, request_handler=_QuietHandler)
        self.host, self.port = host, int(self._server.server_port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="sb3-pref-labelling", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The page's address, token included: what the person opens."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/?token={self.token}"

    def close(self) -> None:
        """Stop serving (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

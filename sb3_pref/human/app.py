"""
The labelling web page's Flask app: its routes and their request handlers.

Every request must carry the run's random access token (``?token=...`` or an ``X-Feedback-Token``
header); answers are accepted only for queries of the run's :class:`LabelStore`, media only for the
clips of those queries, and every malformed request gets a 4xx JSON error. Nothing a request does
can raise into the training thread: requests run in the server's own threads.

Separate from :mod:`sb3_pref.human.server`, which runs this app (binding a port, a background
thread, shutting down): here is only what a request sees, so the app can be served another way
(e.g. Flask's test client) without starting a server.
"""

import hmac
import math
import os
import re
import secrets
import threading
import time
import warnings
from typing import Any, Callable, Optional, Union

from sb3_pref.envs.optional import install_hint

try:
    from flask import Flask, Response, jsonify, request, send_from_directory
    from werkzeug.exceptions import HTTPException
except ModuleNotFoundError as error:  # pragma: no cover (the human extra installs Flask)
    raise ImportError(f"the labelling page needs Flask ({error}): {install_hint('human')}") from error

from sb3_pref.human.choices import CHOICE_LABELS
from sb3_pref.human.page import render_page, render_token_page
from sb3_pref.human.params import BadParameter, id_arg, json_object, name_arg, parse_labeller, parse_query_id, viewer_arg
from sb3_pref.human.store import LabelStore, UnknownQueryError

TOKEN_HEADER = "X-Feedback-Token"
# Query ids and media names are plain: anything else is refused before touching the disk or the database.
_MEDIA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\.(mp4|webm|gif)$")
_MEDIA_TYPES = {"mp4": "video/mp4", "webm": "video/webm", "gif": "image/gif"}
# A tab that has not polled for this long has let go of its pair: another person may take it.
LEASE_SECONDS = 15.0

StatusFn = Callable[[], dict[str, Any]]


def _bad_request(message: str, code: int = 400) -> tuple[Response, int]:
    return jsonify(error=message), code


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
        cross_check: bool = True,
    ) -> None:
        self.store, self.media_dir, self.token = store, os.path.abspath(media_dir), token
        self.cross_check = cross_check
        self.status, self.on_answer, self.instruction = status, on_answer, instruction
        # viewer (one browser tab) -> (query id on its screen, last poll): each tab gets its own pair.
        self._leases: dict[str, tuple[int, float]] = {}
        self._lease_lock = threading.Lock()

    def check_token(self) -> Optional[tuple[Response, int]]:
        given = request.args.get("token") or request.headers.get(TOKEN_HEADER)
        if given and hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        code = 403 if given else 401
        if request.path == "/":  # a person opened the link without its token: a page, not raw JSON
            nonce = secrets.token_urlsafe(16)
            response = Response(render_token_page(nonce, wrong=bool(given)), status=code, mimetype="text/html")
            response.headers["Content-Security-Policy"] = f"default-src 'none'; style-src 'nonce-{nonce}'"
            return response, code
        reason = "wrong" if given else "missing"
        return _bad_request(f"{reason} access token: open the URL printed by the training script", code)

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
    def bad_parameter(error: BadParameter) -> tuple[Response, int]:
        return _bad_request(str(error))

    @staticmethod
    def unexpected_error(error: Exception) -> tuple[Response, int]:
        warnings.warn(f"labelling server: {type(error).__name__}: {error}")
        return _bad_request("internal error; the answer was not stored", 500)

    def page(self) -> Response:
        nonce = secrets.token_urlsafe(16)
        # The run's criterion for pairs that look alike is kept in its folder (HumanTeacher(when_alike=...)).
        when_alike = self.store.get_meta("when_alike", "")
        response = Response(render_page(nonce, self.instruction, when_alike), mimetype="text/html")
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; media-src 'self'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return response

    def _assign(self, viewer: Optional[str], name: Optional[str]) -> tuple[Optional[dict[str, Any]], bool]:
        """
        The pair for one tab: the one it already shows while it still needs an answer, else the oldest
        pending pair no other live tab shows, else (for a named person) a pair another person answered,
        for a second opinion, else (more tabs than pairs) the oldest pending pair, shared.

        :return: (row or None; a second-opinion row has the first answer's ``labeller``, whether another
            tab shows the same pair)
        """
        pending = self.store.pending(limit=64)
        if viewer is None:
            return (pending[0] if pending else None), False
        now = time.monotonic()
        with self._lease_lock:
            for other, (_, seen) in list(self._leases.items()):
                if now - seen > LEASE_SECONDS:
                    del self._leases[other]
            rows = {row["id"]: row for row in pending}
            taken = {query_id for other, (query_id, _) in self._leases.items() if other != viewer}
            mine = self._leases.get(viewer)
            row: Optional[dict[str, Any]] = None
            if mine is not None:
                row = rows.get(mine[0])
                if row is None and name and self.cross_check:
                    row = next(iter(self.store.check_pairs(name, query_id=mine[0])), None)
            if row is None:
                free = [candidate for candidate in pending if candidate["id"] not in taken]
                checks = self.store.check_pairs(name) if name and self.cross_check and not free else []
                row = free[0] if free else checks[0] if checks else pending[0] if pending else None
            if row is None:
                self._leases.pop(viewer, None)
                return None, False
            self._leases[viewer] = (row["id"], now)
            return row, row["id"] in taken

    def _status(self) -> dict[str, Any]:
        status = dict(self.status()) if self.status is not None else {}
        final = status.get("final")
        if isinstance(final, dict) and final.get("clip"):
            status["final"] = {**final, "clip": f"media/{final['clip']}?token={self.token}"}
        people = self.store.people_agreement()
        status["people"] = None if people["people"] < 2 and people["n"] == 0 else people
        if status["people"] is not None and math.isnan(people["rate"]):
            status["people"] = {**people, "rate": None}
        return status

    def next_query(self) -> Union[Response, tuple[Response, int]]:
        # Every parameter is checked before any is used: a bad one is a 400 and changes nothing (no lease taken).
        viewer, name, showing, last = viewer_arg(), name_arg(), id_arg("showing"), id_arg("last")
        row, shared = self._assign(viewer, name)
        query = None
        if row is not None:
            # Clip URLs carry the token: a video element cannot send headers.
            left, right = (f"media/{row[key]}?token={self.token}" for key in ("video_0", "video_1"))
            query = {"id": row["id"], "round": row["round"], "left": left, "right": right, "shared": shared}
            if "labeller" in row:
                query["check"] = {"labeller": row["labeller"]}
        reply: dict[str, Any] = {"query": query, "counts": self.store.counts(), "status": self._status()}
        # The pair this tab shows was answered elsewhere (another tab or person): say which answer stood.
        if showing is not None and (query is None or showing != query["id"]):
            info = self.store.answer_info(showing)
            if info is not None:
                reply["replaced"] = {"id": showing, "choice": info["choice"], "labeller": info["labeller"]}
        if last is not None:
            info = self.store.answer_info(last)
            reply["last_open"] = bool(info is not None and not info["used"] and (info["labeller"] or None) == name)
        return jsonify(reply)

    def _choice_body(self) -> Union[tuple[int, str, Optional[str]], tuple[Response, int]]:
        body = json_object()
        if body is None:
            return _bad_request('expected a JSON object {"query_id": <int>, "choice": "left|right|equal|skip"}')
        query_id = parse_query_id(body.get("query_id"))
        choice = body.get("choice")
        valid, labeller = parse_labeller(body.get("labeller"))
        if query_id is None:
            return _bad_request("query_id must be a positive 64-bit integer")
        if not isinstance(choice, str) or choice not in CHOICE_LABELS:
            return _bad_request(f"choice must be one of {', '.join(CHOICE_LABELS)}")
        if not valid:
            return _bad_request("labeller must be a name of at most 40 printable characters")
        return query_id, choice, labeller

    def answer(self) -> tuple[Response, int]:
        parsed = self._choice_body()
        if isinstance(parsed[0], Response):
            return parsed
        query_id, choice, labeller = parsed
        try:
            result = self.store.submit(query_id, choice, labeller)
        except UnknownQueryError:
            return _bad_request(f"no query {query_id} was issued by this run", 404)
        standing = {"choice": result["choice"], "labeller": result["labeller"]}
        if result["status"] == "conflict":
            reply = jsonify(error=f"query {query_id} was already answered {result['choice']!r}; the first answer stands",
                            standing=standing)  # fmt: skip
            return reply, 409
        if result["status"] == "new" and self.on_answer is not None:
            self.on_answer(query_id, choice)
        info = self.store.answer_info(query_id)
        return jsonify(
            stored=result["status"] == "new",
            second_opinion=result["status"] == "second_opinion",
            standing=standing,
            correctable=bool(result["status"] == "new" and info is not None and not info["used"]),
            query_id=query_id,
            choice=choice,
            counts=self.store.counts(),
        ), 200

    def correct(self) -> tuple[Response, int]:
        parsed = self._choice_body()
        if isinstance(parsed[0], Response):
            return parsed
        query_id, choice, labeller = parsed
        outcome = self.store.correct_answer(query_id, choice, labeller)
        if outcome == "unanswered":
            return _bad_request(f"query {query_id} has no answer to correct", 404)
        if outcome == "used":
            return _bad_request("that answer was already used to train the reward model; it stays", 409)
        if outcome == "not_yours":
            return _bad_request("that answer was given by someone else; it stays", 409)
        if self.on_answer is not None:
            self.on_answer(query_id, choice)
        return jsonify(corrected=True, query_id=query_id, choice=choice), 200

    def shown(self) -> tuple[Response, int]:
        body = json_object()
        query_id = parse_query_id(body.get("query_id")) if body is not None else None
        if query_id is None:
            return _bad_request("expected a JSON object with a positive 64-bit integer query_id")
        load_ms = body.get("load_ms") if body is not None else None
        valid_load = isinstance(load_ms, (int, float)) and not isinstance(load_ms, bool) and 0 <= load_ms < 1e8
        seconds = float(load_ms) / 1000.0 if valid_load and load_ms is not None else None
        if not self.store.mark_shown(query_id, seconds):
            return _bad_request(f"no query {query_id} was issued by this run", 404)
        return jsonify(ok=True), 200

    def media(self, name: str) -> Union[Response, tuple[Response, int]]:
        match = _MEDIA_NAME.match(name)
        final = self.store.get_meta("final") or {}
        if match is None or not (self.store.is_media(name) or name == final.get("clip")):
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
    cross_check: bool = True,
) -> Flask:
    """
    :param store: where queries are read and answers written
    :param media_dir: the folder holding the clips
    :param token: the access token every request must carry
    :param status: returns the training side's status for the page (mode, round, progress...)
    :param on_answer: called with ``(query_id, choice)`` after a new answer is stored
    :param instruction: what the person should prefer, shown above the clips
    :param cross_check: show a named person, when no pending pair is free for them, pairs another
        person answered, to measure the agreement between people
    :return: the Flask app
    """
    views = _Views(store, media_dir, token, status, on_answer, instruction, cross_check)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 4096  # answers are tiny; anything larger is refused with 413
    app.before_request(views.check_token)
    app.after_request(views.security_headers)
    app.register_error_handler(HTTPException, views.http_error)
    app.register_error_handler(BadParameter, views.bad_parameter)
    app.register_error_handler(Exception, views.unexpected_error)
    app.add_url_rule("/", "page", views.page, methods=["GET"])
    app.add_url_rule("/api/next", "next", views.next_query, methods=["GET"])
    app.add_url_rule("/api/answer", "answer", views.answer, methods=["POST"])
    app.add_url_rule("/api/shown", "shown", views.shown, methods=["POST"])
    app.add_url_rule("/api/correct", "correct", views.correct, methods=["POST"])
    app.add_url_rule("/media/<name>", "media", views.media, methods=["GET"])
    return app

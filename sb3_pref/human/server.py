"""
The labelling page served from a background thread of the training process (werkzeug's threaded
server): :class:`FeedbackServer` binds the page's address, serves the app of
:mod:`sb3_pref.human.app` until it is closed, and keeps the address in the run folder so a resumed
run serves the same link.

Separate from :mod:`sb3_pref.human.app` because this is the process side (ports, threads, the
address kept across restarts), while the app holds the routes and what each request may do.
"""

import ipaddress
import secrets
import socket
import threading
import warnings
from typing import Any, Callable, Optional

from sb3_pref.envs.optional import install_hint

try:
    from werkzeug.serving import WSGIRequestHandler, make_server
except ModuleNotFoundError as error:  # pragma: no cover (the human extra installs Flask, and werkzeug with it)
    raise ImportError(f"the labelling page needs Flask ({error}): {install_hint('human')}") from error

from sb3_pref.human.app import StatusFn, create_app
from sb3_pref.human.store import LabelStore

#: the run folder's meta key of the page's last address ``{"host", "port", "token"}``
ADDRESS_META = "page_address"


class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not print an access line (with the token in it) for every poll."""

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        pass


def is_loopback(host: str) -> bool:
    """:return: True if ``host`` only accepts connections from this machine"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _port_free(host: str, port: int) -> bool:
    """:return: whether a server could bind ``host:port`` now (werkzeug exits the process when it cannot)"""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug's server binds
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class FeedbackServer:
    """
    The labelling page on a background thread (werkzeug's threaded server).

    :param store: the run's label store
    :param media_dir: folder of the clips
    :param host: interface to bind; the loopback default keeps the page on this machine (use an SSH
        tunnel, ``ssh -L PORT:127.0.0.1:PORT host``, to label from another machine)
    :param port: TCP port; 0 reuses the run folder's last port (a free one the first time)
    :param token: access token; None reuses the run folder's last token (a random one the first time)
    :param status: returns the training side's status for the page
    :param on_answer: called with ``(query_id, choice)`` after each new answer
    :param instruction: what the person should prefer
    :param cross_check: offer a named person second-opinion pairs when no pending pair is free (see :func:`create_app`)
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
        cross_check: bool = True,
    ) -> None:
        if not is_loopback(host):
            warnings.warn(
                f"the labelling page binds {host}: anyone who can reach this machine and knows the token can answer. "
                "Prefer the default 127.0.0.1 with an SSH tunnel."
            )
        # The run folder keeps the page's address: a run resumed after a crash serves the same link, so the tab a
        # person still has open reconnects by itself (it polls until the page is back).
        last = store.get_meta(ADDRESS_META, None) or {}
        same_host = last.get("host") == host
        self.token = token or (last.get("token") if same_host else None) or secrets.token_urlsafe(24)
        self.app = create_app(
            store, media_dir, self.token, status=status, on_answer=on_answer, instruction=instruction, cross_check=cross_check
        )
        self._server = self._bind(host, port or (int(last.get("port", 0)) if same_host else 0), explicit=bool(port))
        self.host, self.port = host, int(self._server.server_port)
        store.set_meta(ADDRESS_META, {"host": host, "port": self.port, "token": self.token})
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="sb3-pref-labelling", daemon=True
        )
        self._thread.start()

    def _bind(self, host: str, port: int, explicit: bool) -> Any:
        if port and not explicit and not _port_free(host, port):
            warnings.warn(
                f"the labelling page's last address (port {port}) is taken: it moves to a new port, so an open tab "
                "must be reopened from the new link",
                stacklevel=3,
            )
            port = 0
        return make_server(host, port, self.app, threaded=True, request_handler=_QuietHandler)

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

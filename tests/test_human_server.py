"""The labelling server's safety: token, issued queries only, its own media only, 4xx for bad requests, loopback only."""

import errno
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest
from human_helpers import pendulum_segments, request, server_base

from sb3_pref.human import FeedbackServer, LabelStore
from sb3_pref.human.server import is_loopback


@pytest.fixture
def served(tmp_path):
    """A server over a store with two queries whose clips exist, plus a file in the clips folder that is no clip."""
    clips = tmp_path / "clips"
    clips.mkdir()
    store = LabelStore(tmp_path / "labels.sqlite")
    seg_0, seg_1 = pendulum_segments(2, 4, seed=0), pendulum_segments(2, 4, seed=5)
    for index in range(2):
        names = (f"clip{index}_0.mp4", f"clip{index}_1.mp4")
        for name in names:
            (clips / name).write_bytes(bytes(range(256)) * 8)
        store.add_query(seg_0, seg_1, index, names, round_index=1)
    (clips / "stray.mp4").write_bytes(b"not issued")
    (tmp_path / "secret.txt").write_text("outside the clips folder")
    answers = []
    server = FeedbackServer(store, str(clips), on_answer=lambda query_id, choice: answers.append((query_id, choice)))
    yield server, store, answers
    server.close()
    store.close()


def test_missing_or_wrong_token_is_refused(served):
    server, store, _ = served
    base = server_base(server.url)
    for path in ("", "api/next", "media/clip0_0.mp4"):
        assert request(base, path)[0] == 401
        assert request(base, path, token="not-the-token")[0] == 403
        assert request(base, path + "?token=not-the-token")[0] == 403
    assert request(base, "api/answer", body={"query_id": 1, "choice": "left"})[0] == 401
    assert request(base, "api/answer", "wrong", {"query_id": 1, "choice": "left"})[0] == 403
    assert store.answers() == {}
    # With the token, the page, the next query and its clips are served; the page itself never embeds the token.
    status, page = request(base, "?token=" + server.token)
    assert status == 200 and server.token.encode() not in page and b"Left is better" in page
    status, reply = request(base, "api/next", server.token)
    assert status == 200 and reply["query"]["id"] == 1 and reply["query"]["left"] == f"media/clip0_0.mp4?token={server.token}"
    assert reply["counts"] == {"queries": 2, "answered": 0, "pending": 2, "skipped": 0}


def test_answers_only_for_issued_queries_and_well_formed_bodies(served):
    server, store, answers = served
    base, token = server_base(server.url), server.token
    bad_bodies = [
        b"not json",
        b"[1, 2]",
        b'"left"',
        b"{}",
        b'{"query_id": 1}',
        b'{"choice": "left"}',
        b'{"query_id": "1", "choice": "left"}',
        b'{"query_id": true, "choice": "left"}',
        b'{"query_id": 1.0, "choice": "left"}',
        b'{"query_id": -1, "choice": "left"}',
        b'{"query_id": 1, "choice": "LEFT"}',
        b'{"query_id": 1, "choice": ["left"]}',
    ]
    for raw in bad_bodies:
        status, reply = request(base, "api/answer", token, raw=raw)
        assert status == 400, raw
        assert "error" in reply
    assert (
        request(base, "api/answer", token, raw=b'{"query_id": 1, "choice": "left", "pad": "' + b"x" * 8000 + b'"}')[0] == 413
    )
    assert request(base, "api/answer", token, {"query_id": 3, "choice": "left"})[0] == 404
    assert request(base, "api/answer", token, {"query_id": 10**30, "choice": "left"})[0] == 400
    assert request(base, "api/shown", token, {"query_id": 7})[0] == 404
    assert request(base, "api/shown", token, raw=b"{")[0] == 400
    assert request(base, "api/nothing", token)[0] == 404
    assert request(base, "api/answer", token)[0] == 405  # GET on a POST route
    # Deeply nested JSON under the 4 kB limit: a clean 400, no RecursionError reaching the server's error path.
    for path in ("api/answer", "api/shown", "api/correct"):
        for raw in (b"[" * 1500, b'{"a":' * 700, b"[" * 1500 + b"]" * 1500):
            status, reply = request(base, path, token, raw=raw)
            assert status == 400 and "expected a JSON object" in reply["error"], (path, raw[:10], status)
    assert store.answers() == {} and answers == []

    status, reply = request(base, "api/answer", token, {"query_id": 2, "choice": "right"})
    assert status == 200 and reply["stored"] is True and reply["counts"]["answered"] == 1
    assert request(base, "api/answer", token, {"query_id": 2, "choice": "right"})[1]["stored"] is False
    status, reply = request(base, "api/answer", token, {"query_id": 2, "choice": "left"})
    assert status == 409 and reply["standing"] == {"choice": "right", "labeller": None}
    assert store.answers() == {2: "right"} and answers == [(2, "right")]
    # Names: at most 40 printable characters.
    for labeller in ("x" * 41, "a\nb", 7):
        assert request(base, "api/answer", token, {"query_id": 1, "choice": "left", "labeller": labeller})[0] == 400
    assert request(base, "api/next?viewer=../x", token)[0] == 400
    # The server is still healthy after all of that.
    assert request(base, "api/next", token)[1]["query"]["id"] == 1


def test_serves_only_its_own_clips(served):
    server, _, _ = served
    base, token = server_base(server.url), server.token
    status, body = request(base, "media/clip1_0.mp4", token)
    assert status == 200 and body == bytes(range(256)) * 8
    # Range requests (what video elements send) are honoured.
    status, body = request(base, "media/clip1_0.mp4", token, headers={"Range": "bytes=0-9"})
    assert status == 206 and body == bytes(range(10))
    refused = [
        "media/stray.mp4",  # in the folder, but no query's clip
        "media/labels.sqlite",
        "media/..%2Fsecret.txt",
        "media/..%2Flabels.sqlite",
        "media/%2E%2E/secret.txt",
        "media/../labels.sqlite",
        "media/" + urllib.parse.quote("/etc/passwd", safe=""),
        "media/clip1_0.mp4%00.txt",
        "secret.txt",
        "clips/clip1_0.mp4",
    ]
    for path in refused:
        status, body = request(base, path, token)
        assert status == 404, path
        assert b"outside the clips folder" not in (body if isinstance(body, bytes) else b"")


def _non_loopback_addresses() -> list[str]:
    """IPv4 addresses of this machine's other interfaces (Linux routing table, then the default route's source)."""
    addresses = set()
    try:
        with open("/proc/net/fib_trie") as handle:
            lines = handle.read().splitlines()
        for previous, line in zip(lines, lines[1:]):
            if "/32 host LOCAL" in line:
                addresses.add(previous.split()[-1])
    except OSError:
        pass
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent for UDP connect
        addresses.add(probe.getsockname()[0])
    except OSError:
        pass
    finally:
        probe.close()
    return sorted(address for address in addresses if not is_loopback(address))


def _reachable(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError as error:
        assert error.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, None), error
        return False


def test_binds_loopback_only_by_default(served, tmp_path):
    server, store, _ = served
    assert server.host == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")
    assert _reachable("127.0.0.1", server.port)
    # 127.0.0.2 is this machine too, but not the bound address: a 0.0.0.0 bind would answer there.
    assert not _reachable("127.0.0.2", server.port)
    for address in _non_loopback_addresses():
        assert not _reachable(address, server.port), address

    # The check is meaningful: a server explicitly bound to every interface is reachable there (and warns).
    with pytest.warns(UserWarning, match="anyone who can reach this machine"):
        everywhere = FeedbackServer(store, str(tmp_path / "clips"), host="0.0.0.0")
    try:
        assert _reachable("127.0.0.2", everywhere.port)
    finally:
        everywhere.close()


def test_page_has_a_strict_content_security_policy(served):
    server, _, _ = served
    with urllib.request.urlopen(server.url, timeout=10) as response:
        policy = response.headers["Content-Security-Policy"]
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["Cache-Control"] == "no-store"
    assert "default-src 'none'" in policy and "script-src 'nonce-" in policy and "unsafe" not in policy


def test_serve_command_line_serves_the_run_dir(tmp_path):
    """``python -m sb3_pref.human serve RUN_DIR`` prints a working page address (not a crash of its own parser)."""
    import subprocess
    import sys

    store = LabelStore(tmp_path / "labels.sqlite")
    store.set_meta("instruction", "Which one stays upright?")
    store.close()
    process = subprocess.Popen(
        [sys.executable, "-m", "sb3_pref.human", "serve", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("label the pending queries at http://127.0.0.1:"), (line, process.stderr.read())
        url = line.split(" at ")[1].split()[0]
        token = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["token"][0]
        status, body = request(server_base(url), "api/next", token)
        assert status == 200 and body is not None
        assert request(server_base(url), "api/next", "wrong-token")[0] == 403
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_every_query_parameter_is_range_checked(served):
    server, store, _ = served
    base, token = server_base(server.url), server.token
    too_big = ["99999999999999999999999", str(2**63), "0", "-1", "1.5", "1e3", "abc", "", " 1", "+1", "0x10"]
    for name in ("showing", "last"):
        for value in too_big:
            status, reply = request(base, f"api/next?{name}={urllib.parse.quote(value)}", token)
            assert status == 400 and name in reply["error"], (name, value, status, reply)
        status, reply = request(base, f"api/next?{name}=1&{name}=2", token)
        assert status == 400 and "once" in reply["error"]
    for query in ("viewer=" + "v" * 65, "viewer=a%20b", "name=" + "n" * 41, "name=a%0Ab", "viewer=a&viewer=b"):
        assert request(base, "api/next?" + query, token)[0] == 400, query
    # The largest id SQLite holds is a valid (unknown) id; real ids work as before.
    assert request(base, f"api/next?showing={2**63 - 1}&last={2**63 - 1}", token)[0] == 200
    store.submit(2, "left")
    status, reply = request(base, "api/next?showing=2&last=2&viewer=tab-1&name=Ann", token)
    assert status == 200 and reply["replaced"]["id"] == 2 and reply["last_open"] is False


def test_the_page_without_its_token_says_which_link_to_open(served):
    server, _, _ = served
    base = server_base(server.url)
    for path, code, reason in (("", 401, "missing its access token"), ("?token=wrong", 403, "access token is wrong")):
        try:
            urllib.request.urlopen(base + path, timeout=10)
            raise AssertionError("the page was served without its token")
        except urllib.error.HTTPError as error:
            assert error.code == code
            assert error.headers["Content-Type"].startswith("text/html")
            assert "default-src 'none'" in error.headers["Content-Security-Policy"]
            page = error.read().decode()
        assert reason in page and "?token=" in page and "python -m sb3_pref.human serve RUN_DIR" in page
        assert server.token not in page
    # The API keeps answering in JSON: the page's script reads it.
    assert request(base, "api/next")[1] == {"error": "missing access token: open the URL printed by the training script"}


def test_a_restarted_run_serves_the_same_link_so_an_open_tab_reconnects(tmp_path):
    """After a crash the resumed run's page has the run folder's last port and token: the old link works again."""
    clips = tmp_path / "clips"
    clips.mkdir()
    store = LabelStore(tmp_path / "labels.sqlite")
    first = FeedbackServer(store, str(clips))
    url, port, token = first.url, first.port, first.token
    first.close()  # the process died: nothing listens on the port any more
    store.close()
    store = LabelStore(tmp_path / "labels.sqlite")  # the resumed process opens the same run folder
    second = FeedbackServer(store, str(clips))
    try:
        assert (second.url, second.port, second.token) == (url, port, token)
        assert request(server_base(url), "api/next", token)[0] == 200  # the old tab's requests are answered
        # While the address is in use (the old process still alive), the page moves and says so.
        with pytest.warns(UserWarning, match=f"last address \\(port {port}\\) is taken"):
            third = FeedbackServer(store, str(clips))
        assert third.port != port and third.token == token
        third.close()
    finally:
        second.close()
    # The folder keeps the newest address (the third's); a token given explicitly is the caller's, kept as given.
    given = FeedbackServer(store, str(clips), token="given-token")
    assert given.token == "given-token" and given.port == third.port
    given.close()
    store.close()

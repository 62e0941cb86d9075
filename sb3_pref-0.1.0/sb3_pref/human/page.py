"""The labelling page: one self-contained HTML file (no build step, no external assets)."""

import html

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Teach the agent: which clip is better?</title>
<style nonce="__NONCE__">
  :root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; background: #f4f6f9; }
  body { margin: 0 auto; max-width: 1080px; padding: 16px 20px 40px; }
  h1 { font-size: 1.35rem; margin: 0 0 4px; }
  .instruction { font-size: 1.15rem; margin: 0 0 14px; }
  .bar { display: flex; flex-wrap: wrap; gap: 8px 20px; align-items: center; background: #fff; border-radius: 10px;
         padding: 10px 14px; box-shadow: 0 1px 3px rgba(0,0,0,.08); margin-bottom: 14px; }
  .count b { font-size: 1.2rem; }
  .training { flex: 1 1 360px; }
  .details { color: #5b6475; font-size: .92rem; }
  .progress { height: 8px; background: #e3e7ee; border-radius: 4px; overflow: hidden; margin-top: 4px; }
  .progress > div { height: 100%; background: #3d7bd9; width: 0; transition: width .5s; }
  .pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
  figure { margin: 0; background: #fff; border-radius: 10px; padding: 10px; box-shadow: 0 1px 3px rgba(0,0,0,.08); }
  figcaption { font-weight: 600; margin-bottom: 6px; text-align: center; }
  .pair-id { color: #5b6475; font-size: .9rem; text-align: center; margin-top: 8px; }
  video, img.clip { width: 100%; aspect-ratio: 4 / 3; object-fit: contain; background: #fff; display: block; }
  .buttons { display: grid; grid-template-columns: 1fr 1fr 1fr 1fr; gap: 12px; margin-top: 16px; }
  button { font: inherit; font-size: 1.05rem; padding: 14px 8px; border-radius: 10px; border: 2px solid #c9d1de;
           background: #fff; cursor: pointer; }
  button:hover:not(:disabled) { border-color: #3d7bd9; }
  button:disabled { opacity: .45; cursor: default; }
  button.main { background: #3d7bd9; border-color: #3d7bd9; color: #fff; font-weight: 600; }
  button.pressed { outline: 4px solid #f0b429; }
  kbd { font: .85rem ui-monospace, monospace; border: 1px solid #aab3c2; border-bottom-width: 2px; border-radius: 4px;
        padding: 0 5px; margin-left: 6px; background: rgba(255,255,255,.85); color: #1d2330; }
  .empty { text-align: center; padding: 60px 10px; font-size: 1.1rem; background: #fff; border-radius: 10px; }
  .note { min-height: 1.4em; margin-top: 10px; text-align: center; color: #2a7a3b; font-weight: 600; }
  .note.error { color: #b3261e; }
  .help { color: #5b6475; font-size: .92rem; margin-top: 18px; }
  [hidden] { display: none !important; }
</style>
</head>
<body>
<h1>Which clip is closer to what you want the agent to do?</h1>
<p class="instruction" id="instruction">__INSTRUCTION__</p>

<div class="bar">
  <div class="count">Answered <b id="answered">0</b></div>
  <div class="count">Waiting for you <b id="pending">0</b></div>
  <div class="training"><div id="training">Connecting to the training process&hellip;</div>
    <div class="details" id="details"></div>
    <div class="progress" id="progress-box" hidden><div id="progress"></div></div></div>
  <div id="agreement" hidden></div>
</div>

<div id="work" hidden>
  <div class="pair">
    <figure><figcaption>Left</figcaption><video id="left" muted loop autoplay playsinline></video>
      <img class="clip" id="left-gif" alt="left clip" hidden></figure>
    <figure><figcaption>Right</figcaption><video id="right" muted loop autoplay playsinline></video>
      <img class="clip" id="right-gif" alt="right clip" hidden></figure>
  </div>
  <div class="buttons">
    <button class="main" data-choice="left" id="btn-left">&larr; Left is better<kbd>&larr;</kbd></button>
    <button data-choice="equal" id="btn-equal">Equally good<kbd>&uarr;</kbd></button>
    <button data-choice="skip" id="btn-skip">Can't tell<kbd>&darr;</kbd></button>
    <button class="main" data-choice="right" id="btn-right">Right is better &rarr;<kbd>&rarr;</kbd></button>
  </div>
  <div class="pair-id" id="pair-id"></div>
</div>
<div class="empty" id="empty">No clips to judge right now. New ones appear here by themselves.</div>
<div class="note" id="note"></div>

<p class="help">Both clips loop. Pick the one that shows more of the behaviour you want, even if neither is good yet.
Keys: <kbd>&larr;</kbd>/<kbd>A</kbd> left, <kbd>&rarr;</kbd>/<kbd>D</kbd> right, <kbd>&uarr;</kbd>/<kbd>W</kbd> equal,
<kbd>&darr;</kbd>/<kbd>S</kbd> can't tell. Every answer is saved at once and cannot be changed; closing this page
loses nothing.</p>

<script nonce="__NONCE__">
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
// A clip is a looping video, or an animated GIF when the server has no video encoder.
const clips = {left: [$("left"), $("left-gif")], right: [$("right"), $("right-gif")]};
const keys = {ArrowLeft: "left", a: "left", ArrowRight: "right", d: "right", ArrowUp: "equal", w: "equal",
              ArrowDown: "skip", s: "skip"};
// ready: both clips of the current pair are playing; answers before that (or within 300 ms of it,
// e.g. the second click of a double click) are ignored, so no pair is answered unseen.
let current = null, busy = false, ready = false, shownAt = 0, lastOk = Date.now();

function note(text, error) { const n = $("note"); n.textContent = text; n.className = error ? "note error" : "note"; }
function clock(seconds) {
  const s = Math.max(0, Math.round(seconds));
  return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
}

function showStatus(counts, status) {
  $("answered").textContent = counts.answered;
  $("pending").textContent = counts.pending + (status.rendering || 0);
  let text;
  const progress = status.progress || {};
  if (status.waiting) {
    text = "Training is paused until you answer round " + status.round + ": " + status.round_left + " pair(s) left";
    if (status.seconds_left !== null && status.seconds_left !== undefined) {
      text += " (it goes on without them in " + clock(status.seconds_left) + ")";
    }
  } else if (status.rendering) {
    text = "Preparing " + status.rendering + " new pair(s) of clips\u2026";
  } else if (progress.done) {
    text = "Training has finished. Your answers are saved.";
  } else if (status.mode === "async") {
    text = "Training keeps running while you answer; your answers join the reward model at its next update.";
  } else {
    text = "Training is running; new clips arrive at the next query round.";
  }
  $("training").textContent = text;
  const parts = [];
  if (progress.timesteps !== undefined) {
    let step = "Step " + progress.timesteps.toLocaleString();
    if (progress.total_timesteps) step += " of " + progress.total_timesteps.toLocaleString();
    parts.push(step);
  }
  if (progress.labels !== undefined) parts.push("reward model trained on " + progress.labels + " labels");
  if (progress.queries_asked !== undefined && progress.budget) {
    parts.push(progress.queries_asked + " of " + progress.budget + " queries asked");
  }
  $("details").textContent = parts.join(" \u00b7 ");
  if (progress.total_timesteps) {
    $("progress-box").hidden = false;
    $("progress").style.width = Math.min(100, 100 * progress.timesteps / progress.total_timesteps) + "%";
  }
  const agreement = status.agreement;
  if (agreement && agreement.n > 0) {
    $("agreement").hidden = false;
    $("agreement").textContent =
      "Agreement with the scripted teacher: " + Math.round(100 * agreement.rate) + "% of " + agreement.n + " pairs";
  }
}

function setButtons(enabled) {
  document.querySelectorAll("button").forEach((b) => { b.disabled = !enabled; if (enabled) b.classList.remove("pressed"); });
}

function setClip(side, url) {
  const [video, image] = clips[side];
  const gif = url !== null && url.split("?")[0].endsWith(".gif");
  video.hidden = gif; image.hidden = !gif;
  if (url !== null && !gif) video.src = url; else { video.removeAttribute("src"); video.load(); }
  if (gif) image.src = url; else image.removeAttribute("src");
}

function clipPlaying(side) {
  const [video, image] = clips[side];
  return image.hidden ? !video.paused && video.readyState >= 2 : image.complete && image.naturalWidth > 0;
}

function show(query) {
  current = query; ready = false;
  setButtons(false);
  setClip("left", query.left); setClip("right", query.right);
  $("pair-id").textContent = "Pair " + query.id + " (query round " + query.round + ")";
  $("work").hidden = false; $("empty").hidden = true;
}

function clear() {
  current = null; ready = false;
  setClip("left", null); setClip("right", null);
  $("work").hidden = true; $("empty").hidden = false;
}

function playing() {
  if (!current || ready || !clipPlaying("left") || !clipPlaying("right")) return;
  ready = true; shownAt = Date.now();
  setButtons(true);
  fetch("api/shown", {method: "POST", headers: {"Content-Type": "application/json", "X-Feedback-Token": token},
                      body: JSON.stringify({query_id: current.id})}).catch(() => {});
}
for (const [video, image] of Object.values(clips)) {
  video.addEventListener("playing", playing);
  image.addEventListener("load", playing);
}

async function poll() {
  try {
    const response = await fetch("api/next?token=" + encodeURIComponent(token), {cache: "no-store"});
    const data = await response.json();
    if (!response.ok) { note(data.error || "The server refused the request.", true); return; }
    lastOk = Date.now();
    if ($("note").classList.contains("error")) note("");
    showStatus(data.counts, data.status || {});
    if (!current && !busy && data.query) show(data.query);
  } catch (error) {
    if (Date.now() - lastOk > 3000) {
      note("Lost contact with the training process (stopped?). Every answer given so far is saved.", true);
    }
  }
}

async function answer(choice) {
  if (!current || busy || !ready || Date.now() - shownAt < 300) return;
  busy = true;
  const button = document.querySelector('button[data-choice="' + choice + '"]');
  button.classList.add("pressed");
  setButtons(false);
  try {
    const response = await fetch("api/answer", {
      method: "POST", headers: {"Content-Type": "application/json", "X-Feedback-Token": token},
      body: JSON.stringify({query_id: current.id, choice: choice})});
    const data = await response.json();
    if (response.ok) {
      note("Saved: " + button.textContent.replace(/[\\u2190-\\u2193]/g, "").trim() + " (pair " + current.id + ")");
      clear();
    } else if (response.status === 409 || response.status === 404) {
      note("That pair was already answered elsewhere; here is the next one.");
      clear();
    } else {
      note(data.error || "The answer was not saved; please try again.", true);
      setButtons(true);
    }
  } catch (error) {
    note("The answer could not be sent; is the training still running? Please try again.", true);
    setButtons(true);
  } finally {
    busy = false;
  }
  poll();
}

document.querySelectorAll("button[data-choice]").forEach((b) => b.addEventListener("click", () => answer(b.dataset.choice)));
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  const choice = keys[event.key] || keys[event.key.toLowerCase()];
  if (choice) { event.preventDefault(); answer(choice); }
});
poll();
setInterval(poll, 500);
</script>
</body>
</html>
"""


def render_page(nonce: str, instruction: str) -> str:
    """
    :param nonce: the per-response CSP nonce allowing the page's own script and style
    :param instruction: what the person should prefer (HTML-escaped here)
    :return: the page
    """
    text = instruction or "Watch both clips, then pick the one you like better."
    return _PAGE.replace("__NONCE__", nonce).replace("__INSTRUCTION__", html.escape(text))

"""
The labelling page in a real headless Chromium (Debian's, through Playwright): it never locks on a
broken clip, tells the truth in ``serve`` mode and across tabs, fits a phone, has clean accessible
names, lets the person correct the last answer, and gives several people different pairs.
"""

import os

import pytest
from human_helpers import (
    ANSWER_DELAY_MS,
    ON_SCREEN,
    PAIR_READY,
    VIEWPORTS,
    chromium_path,
    launched_chromium,
    teacher_with_pairs,
    wait_for,
)

from sb3_pref.human import HumanTeacher, LabelStore
from sb3_pref.human.__main__ import serve
from sb3_pref.human.callbacks import LEARNED_LABEL

pytestmark = [
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian: apt-get install -y chromium)"),
    # one worker runs the module, so the module's browser is launched once (scripts/test.sh: --dist loadgroup)
    pytest.mark.xdist_group("chromium-page"),
]


@pytest.fixture(scope="module")
def browser():
    with launched_chromium() as launched:
        yield launched


@pytest.fixture
def new_page(browser):
    contexts = []

    def make(**options):
        contexts.append(browser.new_context(**{"viewport": {"width": 1100, "height": 820}, **options}))
        return contexts[-1].new_page()

    yield make
    for context in contexts:
        context.close()


def expect():
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def answer_when_ready(page, pair: int, button: str) -> None:
    page.wait_for_function(PAIR_READY, arg=pair, timeout=20_000)
    page.wait_for_timeout(ANSWER_DELAY_MS)
    page.click(button)


def test_a_missing_clip_shows_a_message_and_can_be_answered_cant_tell(tmp_path, new_page):
    teacher = teacher_with_pairs(tmp_path / "run", 2)
    try:
        os.remove(os.path.join(teacher.media_dir, teacher.store.pending(1)[0]["video_0"]))
        teacher.load_state_dict({**teacher.state_dict(), "round": 0})  # as if resumed from a checkpoint before round 1
        page = new_page()
        page.goto(teacher.url)
        # A resumed run tells the person that the pairs they see are asked again.
        expect()(page.locator("#notice")).to_have_text(
            "Training restarted from a checkpoint taken before query round 1. Your answers are kept; the 2 pairs asked "
            "before the restart and not answered yet come first, and no pair is asked twice."
        )
        expect()(page.locator("#left-error")).to_be_visible(timeout=15_000)
        expect()(page.locator("#left-error")).to_contain_text("could not be loaded")
        expect()(page.locator("#note")).to_contain_text("Can't tell")
        # The pair cannot be judged, but the page is not locked: "Can't tell" moves on.
        assert page.is_disabled("#btn-left") and page.is_disabled("#btn-right") and page.is_enabled("#btn-skip")
        page.click("#btn-skip")
        wait_for(lambda: teacher.store.answers() == {1: "skip"})
        answer_when_ready(page, 2, "#btn-right")
        wait_for(lambda: teacher.store.answers() == {1: "skip", 2: "right"})
    finally:
        teacher.close()


def test_serve_mode_keeps_the_instruction_and_says_no_training_runs(tmp_path, new_page):
    instruction, alike = "Prefer the pendulum turning left.", "prefer the higher swing on the left <b>side</b>."
    teacher_with_pairs(tmp_path / "run", 1, instruction=instruction, when_alike=alike, serve=False).close()
    server = serve(str(tmp_path / "run"))
    try:
        page = new_page()
        page.goto(server.url)
        expect()(page.locator("#instruction")).to_have_text(instruction)
        # The run's criterion for pairs that look alike is kept in the run folder, shown as text (escaped).
        expect()(page.locator("#when-alike")).to_have_text("When the clips look alike: " + alike)
        expect()(page.locator("#training")).to_contain_text("No training process is running")
        assert "Training is running" not in page.inner_text("body")
        answer_when_ready(page, 1, "#btn-left")
        # The poll fills #empty's text while it is still hidden: wait for the server's reply to the answer itself,
        # or the server may close before the answer is stored.
        expect()(page.locator("#note")).to_contain_text("Saved: Left is better (pair 1)")
        expect()(page.locator("#empty")).to_be_visible()
        expect()(page.locator("#empty")).to_contain_text("when the training is resumed")
        assert server.app is not None and server.token
    finally:
        server.close()
    with LabelStore(tmp_path / "run" / "labels.sqlite") as store:
        assert store.answers() == {1: "left"}


def test_two_tabs_get_different_pairs_and_hear_which_answer_stood(tmp_path, new_page):
    teacher = teacher_with_pairs(tmp_path / "run", 2)
    try:
        first = new_page()
        second = first.context.new_page()  # same person, two tabs
        first.goto(teacher.url)
        # Without a criterion from the run's author, alike pairs are "can't tell".
        expect()(first.locator("#when-alike")).to_contain_text("If the two clips look alike for this, answer")
        expect()(first.locator("#when-alike")).to_contain_text("\u201cCan't tell\u201d")
        first.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        second.goto(teacher.url)
        second.wait_for_function(PAIR_READY, arg=2, timeout=20_000)  # not the pair the first tab shows
        # The first tab answers pair 1; the only pair left is pair 2, which it now shows too.
        first.wait_for_timeout(ANSWER_DELAY_MS)
        first.click("#btn-left")
        first.wait_for_function(PAIR_READY, arg=2, timeout=20_000)
        expect()(first.locator("#pair-id")).to_contain_text("someone else is judging this pair too")
        # The second tab answers it: the first is told promptly, with the answer that stood, and moves on.
        second.wait_for_timeout(ANSWER_DELAY_MS)
        second.click("#btn-right")
        expect()(first.locator("#note")).to_contain_text("Pair 2 was answered", timeout=3_000)
        expect()(first.locator("#note")).to_contain_text("\u201cRight is better\u201d stands")
        expect()(first.locator("#note")).to_contain_text("No other pair is waiting now")  # no "here is the next pair"
        expect()(first.locator("#work")).to_be_hidden()
        assert teacher.store.answers() == {1: "left", 2: "right"}
    finally:
        teacher.close()


def test_a_duplicated_tab_gets_its_own_pair(tmp_path, new_page):
    """Chrome's "Duplicate tab" (and a link opened in a new tab) copies sessionStorage, so the tab's id: not its pair."""
    teacher = teacher_with_pairs(tmp_path / "run", 3)
    try:
        first = new_page()
        first.goto(teacher.url)
        first.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        viewer = first.evaluate("sessionStorage.getItem('sb3pref-viewer')")
        second = first.context.new_page()
        second.add_init_script(f"sessionStorage.setItem('sb3pref-viewer', {viewer!r})")  # what duplicating copies
        second.goto(teacher.url)
        second.wait_for_function(PAIR_READY, arg=2, timeout=20_000)
        assert second.evaluate("sessionStorage.getItem('sb3pref-viewer')") != viewer
        expect()(second.locator("#pair-id")).not_to_contain_text("someone else")
        first.wait_for_timeout(1_500)  # several polls later the first tab still shows its own pair
        expect()(first.locator("#pair-id")).to_have_text("Pair 1 (query round 1)")
    finally:
        teacher.close()


NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
# The rod's length on screen: the diagonal of the red in a clip's current frame, in CSS pixels as shown.
ROD_PIXELS = """(selector) => {
    const video = document.querySelector(selector), canvas = document.createElement("canvas");
    const box = video.getBoundingClientRect(), scale = Math.min(box.width / video.videoWidth, box.height / video.videoHeight);
    canvas.width = video.videoWidth; canvas.height = video.videoHeight;
    const context = canvas.getContext("2d");
    context.drawImage(video, 0, 0);
    const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
    const red = (x, y) => {
        const i = 4 * (y * canvas.width + x);
        return data[i] > 150 && data[i + 1] < 110 && data[i + 2] < 110;
    };
    let top = canvas.height, bottom = 0, left = canvas.width, right = 0;
    for (let y = 0; y < canvas.height; y++) for (let x = 0; x < canvas.width; x++) if (red(x, y)) {
        top = Math.min(top, y); bottom = Math.max(bottom, y); left = Math.min(left, x); right = Math.max(right, x);
    }
    return Math.hypot(bottom - top, right - left) * scale;
}"""


def test_phone_viewport_fits_without_key_hints_and_names_are_clean(tmp_path, new_page):
    teacher = teacher_with_pairs(tmp_path / "run", 2)
    try:
        phone = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, device_scale_factor=2)
        phone.goto(teacher.url)
        phone.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        assert phone.evaluate(NO_HORIZONTAL_SCROLL), phone.evaluate("document.documentElement.scrollWidth")
        for selector in ("#btn-left", "#btn-right", "#btn-equal", "#btn-skip", "#left", "#right"):
            box = phone.locator(selector).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (selector, box)
        # Side by side, each clip 176 px square at 390 px (stacked, the height left each 120 px), and the pendulum is
        # cropped to what the pair draws: its rod is longer on screen than the 35 px of the uncropped clip.
        left, right = (phone.locator(selector).bounding_box() for selector in ("#left", "#right"))
        assert left["y"] == right["y"] and min(left["height"], right["height"]) >= 170, (left, right)
        rod = phone.evaluate(ROD_PIXELS, "#left")
        print(f"rod on a 390 px phone: {rod:.0f} px")
        assert rod >= 45, rod
        assert not phone.locator("kbd").first.is_visible() and not phone.locator(".help .keys").is_visible()
        phone.wait_for_timeout(ANSWER_DELAY_MS)
        phone.tap("#btn-right")
        wait_for(lambda: teacher.store.answers() == {1: "right"})
        # After an answer its note and the change button join the buttons: Replay and Speed stay in view, uncovered.
        phone.wait_for_function(PAIR_READY, arg=2, timeout=20_000)
        expect()(phone.locator("#change")).to_be_visible()
        for selector in ("#replay", "#speed", "#note", "#change", "#left", "#right"):
            assert phone.evaluate(ON_SCREEN, selector), (selector, phone.locator(selector).bounding_box())

        desktop = new_page()
        desktop.goto(teacher.url)
        desktop.wait_for_function(PAIR_READY, arg=2, timeout=20_000)
        assert desktop.locator("#btn-left kbd").is_visible()  # keyboard hints where there is a keyboard
        # Accessible names: no arrows or key hints read out; status announced; clips and buttons described.
        for name in ("Left is better", "Right is better", "Equally good", "Can't tell", "Replay both"):
            expect()(desktop.get_by_role("button", name=name, exact=True)).to_have_count(1)
        expect()(desktop.get_by_role("button", name="Equally good", exact=True)).to_have_accessible_description(
            "Equally good: both show it as much; the reward model learns them as a tie (a label of 0.5)."
        )
        expect()(desktop.get_by_role("button", name="Can't tell", exact=True)).to_have_accessible_description(
            "Can't tell: you cannot judge this pair (or a clip does not play); the pair is thrown away and teaches nothing."
        )
        expect()(desktop.get_by_label("Left clip", exact=True)).to_have_count(1)
        expect()(desktop.get_by_label("Right clip", exact=True)).to_have_count(1)
        expect()(desktop.get_by_label("Playback speed")).to_have_count(0)
        expect()(desktop.get_by_label("Speed")).to_have_count(1)
        statuses = desktop.get_by_role("status")
        assert statuses.count() >= 2 and desktop.locator("#training").get_attribute("aria-live") == "polite"
    finally:
        teacher.close()


def test_replay_in_sync_and_slower_playback(tmp_path, new_page):
    teacher = teacher_with_pairs(tmp_path / "run", 1, horizon=40)
    try:
        page = new_page()
        page.goto(teacher.url)
        page.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        page.select_option("#speed", "0.25")
        assert page.evaluate("[left.playbackRate, right.playbackRate]") == [0.25, 0.25]
        page.wait_for_timeout(400)
        page.click("#replay")
        times = page.evaluate("[left.currentTime, right.currentTime]")
        assert all(t < 0.3 for t in times), times  # both restarted
        page.wait_for_timeout(600)
        times = page.evaluate("[left.currentTime, right.currentTime, left.paused, right.paused]")
        assert abs(times[0] - times[1]) < 0.1 and not times[2] and not times[3], times
        assert 0.05 < times[0] < 0.4, times  # a quarter of real time: about 0.15 s of clip in 0.6 s
    finally:
        teacher.close()


def test_the_last_answer_can_be_corrected_until_training_uses_it(tmp_path, new_page):
    teacher = teacher_with_pairs(tmp_path / "run", 2)
    try:
        page = new_page()
        page.goto(teacher.url)
        answer_when_ready(page, 1, "#btn-left")
        expect()(page.get_by_role("button", name="Change your answer to pair 1")).to_be_visible()
        page.get_by_role("button", name="Change your answer to pair 1").click()
        expect()(page.locator("#correcting")).to_contain_text("Changing your answer to pair 1")
        answer_when_ready(page, 1, "#btn-right")
        expect()(page.locator("#note")).to_contain_text("pair 1 is now \u201cRight is better\u201d")
        assert teacher.store.answers() == {1: "right"}
        # Pair 2 answered; then training takes the answers: the page stops offering a change.
        answer_when_ready(page, 2, "#btn-equal")
        expect()(page.get_by_role("button", name="Change your answer to pair 2")).to_be_visible()
        page.reload()  # a reload keeps the offer while the answer is still open to change
        expect()(page.get_by_role("button", name="Change your answer to pair 2")).to_be_visible()
        _, _, labels = teacher.late_labels()
        assert labels.tolist() == [1.0, 0.5]
        expect()(page.locator("#change")).to_be_hidden(timeout=3_000)
        assert teacher.store.correct_answer(2, "left") == "used" and teacher.store.answers() == {1: "right", 2: "equal"}
    finally:
        teacher.close()


def test_several_people_get_different_pairs_and_their_agreement_is_reported(tmp_path, new_page):
    teacher = teacher_with_pairs(tmp_path / "run", 2)
    try:
        pages = {}
        for name in ("Ann", "Ben"):
            page = new_page()  # a browser profile each: names are kept per browser
            page.goto(teacher.url)
            page.fill("#name", name)
            page.press("#name", "Tab")
            pages[name] = page
        ann, ben = pages["Ann"], pages["Ben"]
        ann.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        ben.wait_for_function(PAIR_READY, arg=2, timeout=20_000)
        ann.wait_for_timeout(ANSWER_DELAY_MS)
        ann.click("#btn-left")
        ben.click("#btn-right")
        wait_for(lambda: teacher.store.answers() == {1: "left", 2: "right"})
        # Nothing pending: each is asked for a second opinion on the other's pair.
        ann.wait_for_function(PAIR_READY, arg=2, timeout=20_000)
        ben.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        expect()(ann.locator("#pair-id")).to_contain_text("second opinion: Ben answered it already")
        ann.wait_for_timeout(ANSWER_DELAY_MS)
        ann.click("#btn-right")  # agrees with Ben
        ben.click("#btn-right")  # disagrees with Ann
        expect()(ann.locator("#people")).to_contain_text("Agreement between people: 50% of 2 pairs judged twice (2 people)")
        expect()(ann.locator("#empty")).to_be_visible()
        assert teacher.store.answers() == {1: "left", 2: "right"}  # second opinions never change training
        assert teacher.store.labellers() == {"Ann": 1, "Ben": 1}
        assert teacher.store.people_agreement() == {"n": 2.0, "agree": 1.0, "rate": 0.5, "people": 2.0}
    finally:
        teacher.close()


ANSWER_BUTTONS = ("#btn-left", "#btn-equal", "#btn-skip", "#btn-right")


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_answering_fits_the_screen_and_a_stopped_run_stops_answering(tmp_path, new_page, screen):
    resume = "python train.py --resume runs/x/checkpoints/model_8192_steps.zip"
    teacher = teacher_with_pairs(tmp_path / "run", 3, resume_command=resume)
    stopped = False
    try:
        page = new_page(**VIEWPORTS[screen])
        width = VIEWPORTS[screen]["viewport"]["width"]
        # Without its token the address explains itself, in a page rather than the API's JSON.
        page.goto(teacher.url.split("?")[0])
        expect()(page.locator("h1")).to_have_text("The labelling page needs its full link")
        expect()(page.locator("body")).to_contain_text("missing its access token")

        os.remove(os.path.join(teacher.media_dir, teacher.store.pending(3)[2]["video_0"]))  # pair 3 cannot be judged
        page.goto(teacher.url)
        page.wait_for_function(PAIR_READY, arg=1, timeout=20_000)
        # The buttons can be seen and pressed as the page opens, with no scrolling, at both sizes.
        assert page.evaluate("scrollY") == 0
        for selector in ANSWER_BUTTONS:
            assert page.evaluate(ON_SCREEN, selector), (screen, selector, page.locator(selector).bounding_box())
        if width > 600:  # side by side, the clips shrink so that they fit above the buttons, whole
            dock = page.locator("#dock").bounding_box()
            for selector in ("#left", "#right"):
                box = page.locator(selector).bounding_box()
                assert box["y"] >= 0 and box["y"] + box["height"] <= dock["y"] + 1, (selector, box, dock)
                assert box["height"] >= 180, box
        page.wait_for_timeout(ANSWER_DELAY_MS)
        page.click("#btn-left")
        # The answer's note and its correction button are on screen too, and the button says which pair it changes.
        expect()(page.locator("#note")).to_have_text("Saved: Left is better (pair 1).")
        change = page.get_by_role("button", name="Change your answer to pair 1", exact=True)
        expect()(change).to_be_visible()
        assert page.evaluate(ON_SCREEN, "#note") and page.evaluate(ON_SCREEN, "#change")
        # Pair 3 has a broken clip: no button keeps the outline of the answer to pair 2, and the correction
        # button next to the broken pair names pair 2.
        answer_when_ready(page, 2, "#btn-right")
        expect()(page.locator("#left-error")).to_be_visible(timeout=15_000)
        expect()(page.locator("#pair-id")).to_contain_text("Pair 3 ")
        assert page.locator("button.pressed").count() == 0
        expect()(page.get_by_role("button", name="Change your answer to pair 2", exact=True)).to_be_visible()
        assert page.evaluate(ON_SCREEN, "#btn-skip") and page.is_enabled("#btn-skip")

        # The training process dies: answering stops at once, and the page says how to go on.
        teacher.close()
        stopped = True
        lost = page.locator("#lost")
        expect()(lost).to_be_visible(timeout=6_000)
        expect()(lost).to_contain_text("Training has stopped. Every answer given so far is saved.")
        expect()(lost).to_contain_text(resume)
        expect()(lost).to_contain_text(f"python -m sb3_pref.human serve {teacher.run_dir}")
        expect()(page.locator("#training")).to_contain_text("Lost contact with the training process")
        for selector in ANSWER_BUTTONS:
            expect()(page.locator(selector)).to_be_disabled()
        expect()(page.locator("#change")).to_be_hidden()
        page.keyboard.press("s")
        page.wait_for_timeout(300)
        assert page.locator("button.pressed").count() == 0
    finally:
        if not stopped:
            teacher.close()
    with LabelStore(tmp_path / "run" / "labels.sqlite") as store:
        assert store.answers() == {1: "left", 2: "right"}


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_a_resumed_run_shows_its_curve_at_once(tmp_path, new_page, screen):
    run_dir = tmp_path / "run"
    with HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", serve=False, verbose=0) as first:
        first.add_curve_points(128, {"behaviour": 0.5}, {"behaviour": "Turns"})
        for step in (256, 512, 768):  # the reward model refitted before 512
            refits = ("learned",) if step == 512 else ()
            first.add_curve_points(step, {"learned": step / 256, "behaviour": 1.0}, {"learned": LEARNED_LABEL}, refits=refits)
    resumed = HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", verbose=0)  # a new process, the same run folder
    try:
        page = new_page(**VIEWPORTS[screen])
        page.goto(resumed.url)
        curve = page.locator('#curves .chart[data-key="learned"] svg')
        expect()(curve).to_have_attribute("aria-label", f"{LEARNED_LABEL}: 1.0 at step 256, 3.0 at step 768 (3 points)")
        curve.scroll_into_view_if_needed()
        expect()(curve).to_be_visible()
        # The refit breaks the line and is marked: a dot for the one point before it, a line after, one dashed mark.
        assert curve.locator("circle").count() == 1 and curve.locator("polyline.stretch").count() == 1
        assert curve.locator("line.refit").count() == 1
        # Both curves over the same steps (the earliest point of any curve to the latest), so they line up.
        for key in ("learned", "behaviour"):
            expect()(page.locator(f'#curves .chart[data-key="{key}"] svg text').nth(2)).to_have_text("step 128")
        # Training restarts from its checkpoint at step 512: the curve goes on from there, it does not vanish.
        resumed.add_curve_points(512, {}, {})
        expect()(curve).to_have_attribute("aria-label", f"{LEARNED_LABEL}: 1.0 at step 256, 2.0 at step 512 (2 points)")
    finally:
        resumed.close()

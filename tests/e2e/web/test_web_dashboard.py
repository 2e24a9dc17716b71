"""The dashboard in a real browser against a real server, with real tasks (processes) in the queue.

The cluster (dashboard-policy.yaml): one pool `gpu` of 8 GPUs; alpha and beta have 4 each, alpha may
borrow 2. The scenario, set up once through the API:
    A1  alpha 4 GPUs  running (its whole quota)
    A2  alpha 2 GPUs  running, borrowing 2 of beta's idle GPUs
    A3  alpha 2 GPUs  pending: alpha is at its borrow limit
    B1  beta  1 GPU   running, submitted by a beta member
so the pool has 7 GPUs used, 2 of them borrowed, and 1 idle.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.e2e.web.conftest import POLICY

from gpucommons.api import schemas
from gpucommons.chargeback.explain import BUDGET_SENTENCE, PLATFORM_SENTENCE, idle_share_sentence
from gpucommons.policy import load_policy
from gpucommons.testing.web import Server, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SLEEP = ["sleep", "600"]


@dataclass
class Scenario:
    server: Server
    a1: schemas.Task
    a2: schemas.Task
    a3: schemas.Task
    b1: schemas.Task
    beta_token: str


def submit(server: Server, token: str | None, team: str, gpus: int, name: str) -> schemas.Task:
    with server.client(token) as client:
        return client.submit(schemas.TaskSubmit(team=team, gpus=gpus, command=SLEEP, name=name))


def wait_state(server: Server, task: schemas.Task, state: str) -> schemas.Task:
    with server.client() as client:

        def reached() -> schemas.Task | None:
            current = client.task(task.id)
            return current if current.state == state else None

        return wait_for(f"{task.name} to be {state}", reached)


@pytest.fixture(scope="module")
def scenario(server: Server) -> Scenario:
    beta_token = server.team_token("beta", name="bea")
    a1 = submit(server, None, "alpha", 4, "alpha-big")
    wait_state(server, a1, "running")
    a2 = submit(server, None, "alpha", 2, "alpha-borrower")
    wait_state(server, a2, "running")
    a3 = submit(server, None, "alpha", 2, "alpha-waiting")
    b1 = submit(server, beta_token, "beta", 1, "beta-small")
    wait_state(server, b1, "running")
    with server.client() as client:
        # The engine has looked at A3 and said why it waits.
        wait_for("a reason for the pending task", lambda: [q for q in client.queue() if q.reason_code])
    return Scenario(server, a1, a2, a3, b1, beta_token)


def stat(page: Any, pool: str, key: str) -> str:
    return str(page.inner_text(f"article[data-pool='{pool}'] dd[data-stat='{key}']")).strip()


def test_overview_shows_pool_totals_and_each_teams_use_of_its_quota(
    scenario: Scenario, open_page: Any, shots: Path
) -> None:
    page = open_page(scenario.server.admin_token)
    page.wait_for_selector("article[data-pool='gpu']")
    wait_for("the pool card to show 7 used", lambda: stat(page, "gpu", "used") == "7", timeout=10)
    assert stat(page, "gpu", "borrowed") == "2"
    assert stat(page, "gpu", "idle") == "1"
    assert stat(page, "gpu", "capacity") == "8"

    alpha = page.locator("tr[data-team='alpha'][data-pool='gpu']")
    assert alpha.locator("td[data-col='used']").inner_text().strip() == "6 / 4"
    assert alpha.locator("td[data-col='borrowed']").inner_text().strip() == "2"
    assert alpha.locator("td[data-col='queue']").inner_text().startswith("1")
    label = alpha.locator("svg.bar").get_attribute("aria-label")
    assert label == "alpha in gpu: 6 of 4 quota GPUs used, 2 borrowed, borrow limit 2"
    beta = page.locator("tr[data-team='beta'][data-pool='gpu']")
    assert beta.locator("td[data-col='used']").inner_text().strip() == "1 / 4"
    assert beta.locator("td[data-col='queue']").inner_text().strip() == "0"
    page.screenshot(path=str(shots / "dashboard.png"), full_page=True)


def test_a_pending_task_shows_its_place_in_the_queue_and_the_engines_reason(
    scenario: Scenario, open_page: Any, shots: Path
) -> None:
    with scenario.server.client() as client:
        (entry,) = [q for q in client.queue() if q.task_id == scenario.a3.id]
    assert entry.reason and entry.reason_code

    page = open_page(scenario.server.admin_token, path="#/tasks")
    item = page.locator(f"li.queue-item[data-task-id='{scenario.a3.id}']")
    item.wait_for()
    assert item.locator(".queue-pos").inner_text().strip() == f"#{entry.position}"
    assert item.locator("p.reason").inner_text().strip() == entry.reason
    assert item.locator("p.reason").get_attribute("data-reason-code") == entry.reason_code
    row = page.locator(f"tr[data-task-id='{scenario.a3.id}']")
    assert "waiting" in row.inner_text()
    for task in (scenario.a1, scenario.a2, scenario.b1):
        assert page.locator(f"tr[data-task-id='{task.id}']").get_attribute("data-state") == "running"
    page.screenshot(path=str(shots / "tasks.png"), full_page=True)

    page.click(f"li.queue-item[data-task-id='{scenario.a3.id}'] a")
    page.wait_for_selector("h1:has-text('alpha-waiting')")
    callout = page.locator(".callout.waiting")
    assert entry.reason in callout.inner_text()
    assert f"#{entry.position} in the cluster's queue" in callout.inner_text()


def test_a_member_of_one_team_never_sees_another_teams_tasks(scenario: Scenario, open_page: Any) -> None:
    page = open_page(scenario.beta_token, path="#/tasks?state=")
    page.wait_for_selector(f"tr[data-task-id='{scenario.b1.id}']")
    text = page.inner_text("main")
    for task in (scenario.a1, scenario.a2, scenario.a3):
        assert task.id not in text and task.name not in text
    assert page.locator("tbody tr[data-task-id]").count() == 1
    assert "beta" in page.inner_text("#who")

    # The overview lists beta's quota only, but the pool's totals are the whole cluster's.
    page.goto(scenario.server.url + "/#/")
    page.wait_for_selector("tr[data-team='beta']")
    assert page.locator("tr[data-team='alpha']").count() == 0
    assert stat(page, "gpu", "used") == "7"

    # A member may cancel only their own tasks: no button on a teammate's.
    with scenario.server.client() as client:
        mate = client.submit(schemas.TaskSubmit(team="beta", gpus=4, command=SLEEP, name="beta-mates"))
    page.goto(scenario.server.url + f"/#/tasks/{mate.id}")
    page.wait_for_selector("h1:has-text('beta-mates')")
    assert page.locator("#cancel-button").count() == 0
    with scenario.server.client() as client:
        client.cancel(mate.id)

    # Even a direct link to an alpha task shows nothing of it.
    page.goto(scenario.server.url + f"/#/tasks/{scenario.a1.id}")
    error = page.wait_for_selector(".load-error")
    assert re.search(r"may not see|Not found", error.inner_text())
    assert "alpha-big" not in page.inner_text("main")


def test_submit_form_creates_a_task_and_cancel_stops_it(
    scenario: Scenario, open_page: Any, shots: Path
) -> None:
    page = open_page(scenario.beta_token, path="#/submit")
    page.wait_for_selector("#f-team")
    assert page.locator("#f-team option").all_inner_texts() == ["beta"]
    # `urgent` is reserved for alpha (dashboard-policy.yaml): beta's form does not offer it.
    classes = page.locator("#f-priority option").evaluate_all("options => options.map(o => o.value)")
    assert classes == ["", "training", "normal"]
    page.fill("#f-gpus", "4")
    page.fill("#f-name", "beta-form")
    page.fill("#f-command", "sh -c 'echo hello from the form; sleep 600'")

    # A class that requires checkpoints refuses a task that declares none, and the form says why.
    page.select_option("#f-priority", "training")
    page.click("#submit-button")
    error = page.wait_for_selector("#submit-error:visible")
    assert "checkpoint" in error.inner_text()
    page.select_option("#f-priority", "")

    page.check("#f-checkpoint-on-signal")
    page.screenshot(path=str(shots / "submit.png"), full_page=True)
    page.click("#submit-button")

    page.wait_for_selector("h1:has-text('beta-form')")
    task_id = page.url.rsplit("/", 1)[-1]
    with scenario.server.client() as client:
        task = client.task(task_id)
    assert (task.team, task.gpus, task.checkpoint) == ("beta", 4, "on-signal")
    assert task.command == ["sh", "-c", "echo hello from the form; sleep 600"]
    # beta holds 1 GPU, may not borrow: 4 more wait, and the page says why.
    assert task.state == "pending"
    page.wait_for_selector(".callout.waiting p.reason")

    page.click("#cancel-button")
    page.click("#cancel-confirm")
    page.wait_for_selector("h1 .badge.state-cancelled", timeout=15000)
    assert wait_state(scenario.server, task, "cancelled").state == "cancelled"
    assert "cancelled" in page.inner_text(".events")


def test_a_running_tasks_page_shows_its_events_and_log(
    scenario: Scenario, open_page: Any, shots: Path
) -> None:
    with scenario.server.client() as client:
        task = client.submit(
            schemas.TaskSubmit(
                team="beta",
                gpus=1,
                name="beta-talker",
                command=["sh", "-c", "echo line-one; echo line-two; sleep 600"],
            )
        )
    page = open_page(scenario.beta_token, path=f"#/tasks/{task.id}")
    page.wait_for_selector("h1:has-text('beta-talker')")
    # The log tail refreshes by itself: no reload needed for the output to appear.
    wait_for("the log tail", lambda: "line-two" in page.inner_text("#log-tail"), timeout=20)
    assert "line-one\nline-two" in page.inner_text("#log-tail")
    assert page.locator("table.events tbody tr").count() >= 2
    assert page.locator("h1 .badge.state-running").count() == 1
    page.screenshot(path=str(shots / "task.png"), full_page=True)
    with scenario.server.client() as client:
        client.cancel(task.id)


def test_a_bad_token_is_refused_and_signing_out_forgets_the_token(scenario: Scenario, browser: Any) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(scenario.server.url + "/")
        page.fill("#token", "gct_0000000000000000.not-a-real-secret")
        page.click("#signin-button")
        assert "not accepted" in page.wait_for_selector("#signin-error").inner_text()

        page.fill("#token", scenario.server.admin_token)
        page.click("#signin-button")
        page.wait_for_selector("h1:has-text('Cluster overview')")
        assert "platform admin" in page.inner_text("#who")
        page.reload()  # the token survives a reload (sessionStorage)...
        page.wait_for_selector("h1:has-text('Cluster overview')")
        page.click("#signout")
        page.wait_for_selector("#token")
        assert page.evaluate("sessionStorage.getItem('commons.token')") is None
    finally:
        context.close()


@pytest.mark.parametrize("path", ["#/", "#/tasks", "#/submit", "#/usage"])
def test_pages_fit_a_narrow_screen(scenario: Scenario, open_page: Any, shots: Path, path: str) -> None:
    page = open_page(scenario.server.admin_token, width=390, path=path)
    page.wait_for_selector("main h1")
    page.wait_for_timeout(500)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{path} is {overflow}px wider than a 390px screen"
    page.screenshot(path=str(shots / f"narrow-{path.strip('#/') or 'overview'}.png"), full_page=True)


def test_command_lines_split_like_a_shell_and_ages_read_short(scenario: Scenario, open_page: Any) -> None:
    page = open_page(scenario.server.admin_token)
    result = page.evaluate(
        """async () => {
          const f = await import('/ui/format.js');
          return {
            plain: f.splitCommand('python train.py  --lr 0.1').argv,
            quoted: f.splitCommand(`sh -c 'echo "a b"; ls' "x\\\\"y" z\\\\ w`).argv,
            open: f.splitCommand("echo 'oops").error,
            ages: [42, 300, 12000, 200000].map(f.formatDuration),
            round: f.joinCommand(['sh', '-c', "it's"]),
          };
        }"""
    )
    assert result["plain"] == ["python", "train.py", "--lr", "0.1"]
    assert result["quoted"] == ["sh", "-c", 'echo "a b"; ls', 'x"y', "z w"]
    assert "unclosed single quote" in result["open"]
    assert result["ages"] == ["42s", "5m", "3h 20m", "2d 7h"]
    assert result["round"] == "sh -c 'it'\"'\"'s'"


def test_usage_page_shows_each_visible_teams_gpu_hours_this_month(
    scenario: Scenario, open_page: Any, shots: Path
) -> None:
    page = open_page(scenario.server.admin_token, path="#/usage")
    page.wait_for_selector("table.hours tr[data-team='alpha']")
    assert page.locator("table.hours tr[data-team='beta']").count() == 1
    alpha_hours = float(page.inner_text("tr[data-team='alpha'] td[data-col='gpu-hours']").replace(",", ""))
    assert alpha_hours > 0  # 6 GPUs have been held since the scenario started

    # This month's costs (docs/design.md, contract 5, month to date: they move every second), exactly
    # as the API sent them to the page.
    with page.expect_response(lambda r: "/api/v1/invoices?" in r.url) as answer:
        page.reload()
    costs = answer.value.json()
    page.wait_for_selector("table.costs")
    assert set(costs["teams"]) == {"alpha", "beta"}
    for team, cost in costs["teams"].items():
        total = page.inner_text(f"table.costs tr[data-team='{team}'] td.total")
        assert total == f"${cost['total_cents'] / 100:,.2f}"
    assert "within budget (soft)" in page.inner_text("table.budgets tr[data-team='alpha']")
    page.screenshot(path=str(shots / "usage.png"), full_page=True)

    # What "idle share" and "kept by the platform" are: one sentence each, with this policy's idle rule.
    idle = load_policy(POLICY).chargeback.idle
    notes = page.locator("#cost-notes p.note").all_inner_texts()
    assert idle_share_sentence(idle) in notes and PLATFORM_SENTENCE in notes
    assert f"idle rule '{idle.value}'" in idle_share_sentence(idle)
    # A budget's "spent" is the direct cost so far (idle and admin shares come at the month's end),
    # and says so: its column, its bar and the note under the table.
    budgets = page.locator("table.budgets")
    assert "Direct cost so far" in (budgets.locator("thead").text_content() or "")  # CSS upper-cases it
    bar = budgets.locator("tr[data-team='alpha'] svg").get_attribute("aria-label") or ""
    assert re.fullmatch(r"alpha: \$[\d,.]+ direct cost so far of a \$1,000\.00 budget", bar), bar
    assert page.inner_text("#budget-note") == BUDGET_SENTENCE

    with page.expect_download() as download:
        page.click("button[aria-label^='PDF invoice for alpha']")
    assert Path(download.value.path()).read_bytes().startswith(b"%PDF")

    member = open_page(scenario.beta_token, path="#/usage")
    member.wait_for_selector("table.hours tr[data-team='beta']")
    assert member.locator("table.hours tr[data-team='alpha']").count() == 0
    assert member.locator("table.costs tr[data-team='alpha']").count() == 0

    # A month before the cluster existed has no usage at all.
    page.fill("input[name='month']", "2001-01")
    page.click("form.filters button[type='submit']")
    page.wait_for_selector("text=No GPU was used this month")


def test_overview_refreshes_by_itself_when_the_cluster_changes(scenario: Scenario, open_page: Any) -> None:
    page = open_page(scenario.beta_token)
    beta_used = "tr[data-team='beta'] td[data-col='used']"
    page.wait_for_selector(beta_used)
    before = page.inner_text(beta_used).strip()
    extra = submit(scenario.server, scenario.beta_token, "beta", 1, "beta-extra")
    try:
        wait_state(scenario.server, extra, "running")
        used = int(before.split("/")[0]) + 1
        # No reload: the page polls and redraws.
        wait_for(
            "beta's row to count the new task", lambda: page.inner_text(beta_used).strip() == f"{used} / 4"
        )
    finally:
        with scenario.server.client() as client:
            client.cancel(extra.id)


PAGES = ["#/", "#/tasks?state=", "#/submit", "#/usage", "task"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_pages_pass_the_axe_accessibility_audit(
    scenario: Scenario, open_page: Any, path: str, scheme: str
) -> None:
    """axe-core's WCAG 2.1 A and AA rules: labels, contrast, landmarks, names of controls, ARIA use."""
    axe_module = pytest.importorskip(
        "axe_playwright_python.sync_playwright", reason="pip install axe-playwright-python"
    )
    if path == "task":
        path = f"#/tasks/{scenario.a3.id}"
    page = open_page(scenario.server.admin_token, path=path, scheme=scheme)
    page.wait_for_selector("main h1")
    page.wait_for_timeout(700)  # the page's data has arrived
    results = axe_module.Axe().run(
        page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}
    )
    assert results.violations_count == 0, results.generate_report()


def test_sign_in_page_passes_the_axe_accessibility_audit(scenario: Scenario, browser: Any) -> None:
    axe_module = pytest.importorskip(
        "axe_playwright_python.sync_playwright", reason="pip install axe-playwright-python"
    )
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(scenario.server.url + "/")
        page.wait_for_selector("#token")
        results = axe_module.Axe().run(
            page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa"]}}
        )
        assert results.violations_count == 0, results.generate_report()
    finally:
        context.close()


def test_refreshing_keeps_an_open_confirmation_and_where_the_log_was_scrolled(
    scenario: Scenario, open_page: Any
) -> None:
    ticker = ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.05; done"]
    with scenario.server.client(scenario.beta_token) as client:
        task = client.submit(schemas.TaskSubmit(team="beta", gpus=1, name="beta-ticker", command=ticker))
    try:
        page = open_page(scenario.beta_token, path=f"#/tasks/{task.id}")
        wait_for("a long log", lambda: page.locator("#log-tail").inner_text().count("tick") > 60, timeout=30)
        page.click("#cancel-button")
        page.eval_on_selector("#log-tail", "pre => { pre.scrollTop = 0; }")
        first = page.locator("#log-tail").inner_text().splitlines()[-1]
        # Several refreshes later (the log grew, so the page was redrawn each time):
        wait_for("the log to grow", lambda: page.locator("#log-tail").inner_text().splitlines()[-1] != first)
        page.wait_for_timeout(3500)
        assert page.locator("#cancel-confirm").is_visible()
        assert page.eval_on_selector("#log-tail", "pre => pre.scrollTop") == 0
        page.click("text=Keep it")
        assert page.locator("#cancel-button").is_visible()
    finally:
        with scenario.server.client() as client:
            client.cancel(task.id)


def test_a_redraw_keeps_keyboard_focus_on_the_same_link(scenario: Scenario, open_page: Any) -> None:
    page = open_page(scenario.server.admin_token, path="#/tasks")
    link = f"#task-link-{scenario.a3.id}"
    page.wait_for_selector(link)
    page.focus(link)
    extra = submit(scenario.server, None, "beta", 1, "beta-newcomer")
    try:
        page.wait_for_selector(f"tr[data-task-id='{extra.id}']")  # the table was redrawn
        assert page.evaluate("document.activeElement.id") == f"task-link-{scenario.a3.id}"
    finally:
        with scenario.server.client() as client:
            client.cancel(extra.id)


def _list_requests(page: Any) -> list[float]:
    """The times (monotonic) of the page's `GET /api/v1/tasks` requests, as they are sent."""
    sent: list[float] = []

    def seen(request: Any) -> None:
        if request.method == "GET" and urlsplit(request.url).path == "/api/v1/tasks":
            sent.append(time.monotonic())

    page.on("request", seen)
    return sent


def _sign_in(page: Any, server: Server, token: str) -> None:
    page.goto(server.url + "/")
    page.fill("#token", token)
    page.click("#signin-button")
    page.wait_for_selector("h1:has-text('Cluster overview')")


def test_the_task_list_refreshes_on_events_instead_of_polling(scenario: Scenario, browser: Any) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        streams: list[str] = []
        page.on("request", lambda r: streams.append(r.url) if "/api/v1/events" in r.url else None)
        _sign_in(page, scenario.server, scenario.server.admin_token)
        page.goto(scenario.server.url + "/#/tasks")
        page.wait_for_selector(f"tr[data-task-id='{scenario.a1.id}']")
        wait_for("the event stream to open", lambda: bool(streams))
        page.wait_for_timeout(2000)  # the refresh when it opened
        lists = _list_requests(page)
        page.wait_for_timeout(7000)  # polling every 3 s would have fetched the list twice
        assert lists == [], f"{len(lists)} list requests while nothing changed"
        extra = submit(scenario.server, None, "beta", 1, "beta-evented")
        submitted = time.monotonic()
        try:
            page.wait_for_selector(f"tr[data-task-id='{extra.id}']", timeout=5000)
            assert lists and lists[0] - submitted < 2.5, "the list was not fetched on the event"
        finally:
            with scenario.server.client() as client:
                client.cancel(extra.id)
    finally:
        context.close()


def test_without_the_event_stream_the_task_list_polls_as_before(scenario: Scenario, browser: Any) -> None:
    context = browser.new_context()
    try:
        # An older server: no /api/v1/events (404, as for any unknown path).
        context.route("**/api/v1/events**", lambda route: route.fulfill(status=404, body="Not Found"))
        page = context.new_page()
        _sign_in(page, scenario.server, scenario.server.admin_token)
        page.goto(scenario.server.url + "/#/tasks")
        page.wait_for_selector(f"tr[data-task-id='{scenario.a1.id}']")
        lists = _list_requests(page)
        page.wait_for_timeout(7000)
        assert len(lists) >= 2, f"only {len(lists)} list requests in 7 s without the stream"
    finally:
        context.close()

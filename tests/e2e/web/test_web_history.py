"""The history, team, task-timeline, planning and admin pages in Debian's chromium, against one
`commons up` whose store was seeded with a known past (gpucommons.testing.history):

    h-alpha-big  alpha 6 GPUs (2 above quota) for 4 h, ending 6 h before the current half-hour
    h-beta-mid   beta 2 GPUs for 6 h, ending 2 h before it
    h-alpha-old  alpha 2 GPUs for 1 h, 20 h ago, preempted for h-beta-big (then ran 1 min more)
    h-beta-big   beta 4 GPUs for 4 h from that preemption

plus live tasks (alpha 4 + 2 GPUs running, 2 more waiting) and directory members (ann, al in alpha).
Each page is screenshotted at 1400 and 390 px and audited with axe-core (WCAG 2.1 A/AA).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpucommons.api import schemas
from gpucommons.testing.history import Seed, expected_held, history_seeds, seed_store
from gpucommons.testing.web import Server, running_server, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

POLICY = Path(__file__).parent / "dashboard-policy.yaml"
MEMBERS = {"alpha": ["ann", "al"], "alpha-leads": ["ann"], "beta": ["bea"]}
WIDTHS = (1400, 390)
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


@dataclass
class Past:
    server: Server
    seeds: list[Seed]
    #: When the live tasks were submitted: buckets that end before hold the seeded past only.
    live_from: float
    waiting: schemas.Task
    beta_token: str


@pytest.fixture(scope="module")
def past(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Past]:
    home = tmp_path_factory.mktemp("history-home")
    now = time.time()
    seeds = history_seeds(now)
    seed_store(f"sqlite:///{home / 'commons.db'}", seeds, now, MEMBERS)
    with running_server(POLICY, home) as server:
        live_from = time.time()
        with server.client() as client:
            for gpus in (4, 2):
                task = client.submit(schemas.TaskSubmit(team="alpha", gpus=gpus, command=["sleep", "600"]))
                wait_for("a live task to run", lambda t=task: client.task(t.id).state == "running")
            waiting = client.submit(
                schemas.TaskSubmit(team="alpha", gpus=2, command=["sleep", "600"], name="alpha-waits")
            )
            wait_for(
                "the engine's reason for the waiting task",
                lambda: [q for q in client.queue() if q.reason_code],
            )
        yield Past(server, seeds, live_from, waiting, server.team_token("beta", name="bea"))


@pytest.fixture
def open_page(browser: Any, past: Past) -> Iterator[Any]:
    contexts: list[Any] = []
    errors: list[str] = []

    def _open(path: str, token: str | None = None, width: int = 1400, scheme: str = "light") -> Any:
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(past.server.url + "/")
        page.fill("#token", token or past.server.admin_token)
        page.click("#signin-button")
        page.wait_for_selector("h1:has-text('Cluster overview')")
        if path != "#/":
            page.goto(past.server.url + "/" + path)
        page.wait_for_selector("main h1")
        return page

    yield _open
    for context in contexts:
        context.close()
    assert not errors, f"the dashboard threw: {errors}"


def shoot(page: Any, shots: Path, name: str, width: int) -> None:
    page.wait_for_timeout(400)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name} is {overflow}px wider than a {width}px screen"
    page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)


def iso(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def test_the_overview_history_chart_shows_the_seeded_ledger(past: Past, open_page: Any, shots: Path) -> None:
    page = open_page("#/")
    page.wait_for_selector(".gpu-history[data-window='24h'] table.history-numbers", state="attached")
    rows = page.eval_on_selector_all(
        ".history-pool[data-pool='gpu'] table.history-numbers tbody tr",
        """rows => rows.map(r => ({bucket: r.dataset.bucket,
              cells: [...r.querySelectorAll('td')].map(c => ({team: c.dataset.team, held: +c.dataset.held,
                        borrowed: +c.dataset.borrowed, nominal: +c.dataset.nominal}))}))""",
    )
    assert len(rows) == 48
    starts = [iso(r["bucket"]) for r in rows]
    checked = 0
    for i, row in enumerate(rows[:-1]):
        t0, t1 = starts[i], starts[i + 1]
        if t1 > past.live_from:
            continue  # the live tasks are in this one
        for cell in row["cells"]:
            held, borrowed = expected_held(past.seeds, cell["team"], t0, t1)
            assert cell["held"] == pytest.approx(held, abs=1e-3), (row["bucket"], cell)
            assert cell["borrowed"] == pytest.approx(borrowed, abs=1e-3), (row["bucket"], cell)
            assert cell["nominal"] == 4
            checked += 1
    assert checked >= 2 * 44
    peak = [c for r in rows for c in r["cells"] if c["team"] == "alpha" and c["borrowed"] == 2]
    assert len(peak) == 8  # 4 hours of 6 GPUs, 2 of them above the quota, in half-hour buckets
    label = page.get_attribute(".history-pool[data-pool='gpu'] svg.chart", "aria-label")
    assert label and "stacked by team" in label

    page.click("#window-7d")
    page.wait_for_selector(".gpu-history[data-window='7d']")
    assert page.locator(".history-pool[data-pool='gpu'] table.history-numbers tbody tr").count() == 84
    waits = page.locator(".waits .small-chart[data-team='alpha'] table.wait-numbers tbody tr")
    assert waits.count() >= 1
    for width in WIDTHS:
        wide = open_page("#/?window=24h", width=width)
        wide.wait_for_selector(".gpu-history svg.chart")
        shoot(wide, shots, "history-overview", width)


def test_the_team_page_lists_members_costs_against_budget_and_preemptions(
    past: Past, open_page: Any, shots: Path
) -> None:
    page = open_page("#/teams/alpha")
    page.wait_for_selector("h1:has-text('Team alpha')")
    assert page.locator("ul.members li").all_inner_texts() == ["Al (al)", "Ann (ann, team admin)"]
    assert page.inner_text("table.quota tr[data-pool='gpu'] td[data-col='nominal']") == "4"
    assert page.inner_text("table.suffered tr[data-team='beta'] td.num >> nth=0") == "1"
    page.wait_for_selector(".burn-down")
    verdict = page.inner_text("#budget-verdict")
    assert "of $1,000.00 spent" in verdict
    with past.server.client() as client:
        tasks = client.tasks(team="alpha")
    assert page.locator("table.team-tasks tbody tr").count() == min(20, len(tasks))
    for width in WIDTHS:
        shoot(open_page("#/teams/alpha", width=width), shots, "team", width)

    # A member of beta sees beta's page (the preemption it caused, alpha's task unnamed), not alpha's.
    member = open_page("#/teams/beta", token=past.beta_token)
    member.wait_for_selector("table.caused tr[data-team='alpha']")
    member.click("details.numbers summary >> text=preemption")
    assert "h-alpha-old" not in member.inner_text("main")
    member.goto(past.server.url + "/#/teams/alpha")
    assert "may not see" in member.wait_for_selector(".load-error").inner_text()


def test_the_task_page_shows_the_timeline_and_an_estimated_start(
    past: Past, open_page: Any, shots: Path
) -> None:
    page = open_page("#/tasks/h-alpha-old")
    page.wait_for_selector("section.timeline")
    preempted = page.locator("table.attempts tr[data-attempt='1']")
    assert preempted.get_attribute("data-outcome") == "preempted"
    assert preempted.get_attribute("data-preemptor-team") == "beta"
    assert "preempted by team beta" in page.inner_text("ol.steps")
    assert page.locator("ol.steps li[data-kind='resumed']").count() == 1
    for width in WIDTHS:
        shoot(open_page("#/tasks/h-alpha-old", width=width), shots, "task-timeline", width)

    waiting = open_page(f"#/tasks/{past.waiting.id}")
    estimate = waiting.wait_for_selector("#start-estimate")
    likely = estimate.get_attribute("data-likely")
    assert likely and iso(likely) > time.time() - 60
    assert "replay of the queue" in estimate.inner_text()
    for width in WIDTHS:
        page = open_page(f"#/tasks/{past.waiting.id}", width=width)
        page.wait_for_selector("#start-estimate")
        shoot(page, shots, "task-estimate", width)


def test_the_planning_form_replays_a_month_to_completion(past: Past, open_page: Any, shots: Path) -> None:
    page = open_page("#/planning")
    page.wait_for_selector("#replay-form")
    wait_for("the current policy in the form", lambda: "teams:" in page.input_value("#f-policy"))
    month = datetime.fromtimestamp(past.seeds[0].start, UTC).strftime("%Y-%m")
    page.fill("#f-month", month)
    page.fill(
        "#f-policy",
        page.input_value("#f-policy")
        .replace("gpu: {gpus: 4, borrow_limit: 2}", "gpu: {gpus: 5, borrow_limit: 2}")
        .replace("gpu: {gpus: 4, borrow_limit: 0}", "gpu: {gpus: 3, borrow_limit: 0}"),
    )
    # Every state of the progress bar the page shows while the run goes on, as the person sees it.
    page.evaluate(
        """() => {
            window.seenProgress = [];
            const look = () => {
                const bar = document.querySelector('#run-progress-bar');
                const label = document.querySelector('#run-progress label');
                if (bar) window.seenProgress.push([bar.value, bar.max, label ? label.innerText : '']);
            };
            const watched = {subtree: true, childList: true, attributes: true};
            new MutationObserver(look).observe(document.body, watched);
        }"""
    )
    page.click("#replay-button")
    page.wait_for_selector("#run-done", timeout=60000)
    assert "tasks replayed" in page.inner_text("#run-done")
    seen = page.evaluate("window.seenProgress")
    assert seen, "the run showed a progress bar before it was done"
    assert all(0 <= done <= total for done, total, _ in seen), seen
    assert [done for done, _, _ in seen] == sorted(done for done, _, _ in seen), "progress never goes back"
    assert page.locator("table.comparison tbody tr").count() >= 5
    assert page.locator("table.comparison-teams tr[data-team='alpha']").count() == 1
    assert page.locator("table.runs tr[data-status='succeeded']").count() >= 1
    for width in WIDTHS:
        shoot(open_page("#/planning", width=width), shots, "planning", width)


def test_a_member_cannot_open_the_admin_page(past: Past, open_page: Any) -> None:
    page = open_page("#/admin", token=past.beta_token)
    error = page.wait_for_selector(".load-error")
    assert "may not see" in error.inner_text()
    assert page.locator("#f-proposed").count() == 0 and page.locator("table.tokens").count() == 0
    assert page.locator("nav a:has-text('Admin')").count() == 0
    assert page.locator("nav a:has-text('Planning')").count() == 0
    planning = open_page("#/planning", token=past.beta_token)
    assert "may not see" in planning.wait_for_selector(".load-error").inner_text()
    assert planning.locator("#replay-form").count() == 0


def test_the_admin_page_diffs_and_applies_a_policy_and_manages_tokens_and_the_audit_log(
    past: Past, open_page: Any, shots: Path, tmp_path: Path
) -> None:
    page = open_page("#/admin")
    page.wait_for_selector("table.tokens")
    wait_for("the current policy in the form", lambda: "teams:" in page.input_value("#f-proposed"))
    for width in WIDTHS:
        shoot(open_page("#/admin", width=width), shots, "admin", width)

    # A token made in the form, shown once, listed, then revoked.
    page.fill("#f-token-name", "ci-reader")
    page.select_option("#f-token-role", "finance")
    page.click("#token-create")
    assert page.wait_for_selector("#new-token").inner_text().startswith("gct_")
    row = page.wait_for_selector("table.tokens tr:has(th:text-is('ci-reader'))")
    token_id = row.get_attribute("data-token-id")
    page.click(f"#revoke-{token_id}")
    page.click(f"#revoke-confirm-{token_id}")
    wait_for(
        "the token to leave the list", lambda: page.locator(f"tr[data-token-id='{token_id}']").count() == 0
    )

    # The audit log, filtered to token actions.
    page.fill("#audit-filters input[name='action']", "token.*")
    page.click("#audit-filter-button")
    # (the unfiltered table holds token actions too: wait for the filtered one to replace it)
    page.wait_for_url("**action=token.*")

    def actions() -> set[str] | None:
        found = set(page.eval_on_selector_all("table.audit tbody tr", "rs => rs.map(r => r.dataset.action)"))
        return found if found == {"token.create", "token.revoke"} else None

    wait_for("only token actions in the audit table", actions, timeout=15)

    # The policy: a refused file says why; a good one shows its diff and applies.
    text = page.input_value("#f-proposed")
    page.fill("#f-proposed", text.replace("gpus_per_node: 8", "gpus_per_node: 6"))
    page.click("#diff-button")
    assert page.wait_for_selector("#policy-issues").inner_text()
    assert page.locator("#apply-button").is_hidden()
    proposed = tmp_path / "proposed.yaml"
    proposed.write_text(text.replace("gpu: {gpus: 4, borrow_limit: 0}", "gpu: {gpus: 3, borrow_limit: 0}"))
    page.set_input_files("#f-proposed-file", str(proposed))  # a proposed file, loaded into the form
    wait_for("the file in the form", lambda: "gpus: 3, borrow_limit: 0" in page.input_value("#f-proposed"))
    page.click("#diff-button")
    change = page.wait_for_selector("#quota-changes li[data-team='beta']")
    assert change.inner_text() == "beta in gpu: 4 GPUs, borrow ≤ 0 → 3 GPUs, borrow ≤ 0"
    assert "+      gpu: {gpus: 3, borrow_limit: 0}" in page.inner_text("#diff-text")
    shoot(page, shots, "admin-diff", 1400)
    page.click("#apply-button")
    page.click("#apply-confirm")
    page.wait_for_selector("#policy-version:has-text('version 2')")
    with past.server.client() as client:
        assert next(t for t in client.teams() if t.name == "beta").nominal_gpus == 3


PAGES = ["#/?window=24h", "#/teams/alpha", "#/tasks/h-alpha-old", "waiting", "#/planning", "#/admin"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_the_new_pages_pass_the_axe_accessibility_audit(
    past: Past, open_page: Any, path: str, scheme: str
) -> None:
    axe_module = pytest.importorskip(
        "axe_playwright_python.sync_playwright", reason="pip install axe-playwright-python"
    )
    if path == "waiting":
        path = f"#/tasks/{past.waiting.id}"
    page = open_page(path, scheme=scheme)
    page.wait_for_timeout(900)
    results = axe_module.Axe().run(page, options={"runOnly": {"type": "tag", "values": AXE_TAGS}})
    assert results.violations_count == 0, results.generate_report()

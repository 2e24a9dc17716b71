// The dashboard shell: hash routing, sign-in state, and the refresh loop that re-renders a page only
// when its data changed (so focus, selection and scroll survive the polling). Pages about tasks
// (`followsEvents`: the overview, the task list, a team) refresh when the server's event stream
// (`/api/v1/events`) says one of the caller's tasks changed, and poll only every `EVENTS_SAFETY_MS`
// while it is live; without it (an older server, a proxy that breaks streams) they poll as before.
// A task's own page keeps polling: its log grows without events.

import { Api, ApiError, session } from "./api.js";
import { loadContext } from "./data.js";
import { h, replace, tickAges } from "./dom.js";
import { formatDuration } from "./format.js";
import * as admin from "./views/admin.js";
import * as overview from "./views/overview.js";
import * as planning from "./views/planning.js";
import * as signin from "./views/signin.js";
import * as submit from "./views/submit.js";
import * as task from "./views/task.js";
import * as team from "./views/team.js";
import * as tasks from "./views/tasks.js";
import * as usage from "./views/usage.js";

const config = JSON.parse(document.getElementById("commons-config")?.textContent || "{}");
const api = new Api(config.api_base || "/api/v1");
const DEFAULT_REFRESH_MS = config.refresh_ms || 3000;
//: While the event stream is live, a page that follows it polls only this often: what the stream
//: does not tell a caller (other teams' tasks moving the queue positions and the pools' totals it
//: shows) is at most this old.
const EVENTS_SAFETY_MS = 15000;
//: Fewest ms between two refreshes on events, however many arrive (a sweep of 1,000 submissions).
const EVENTS_MIN_GAP_MS = 1000;
//: Wait before following the stream again after it failed.
const EVENTS_RETRY_MS = 5000;

const ROUTES = [
  [/^\/?$/, overview],
  [/^\/tasks\/?$/, tasks],
  [/^\/tasks\/([^/?]+)$/, task, ["id"]],
  [/^\/submit\/?$/, submit],
  [/^\/usage\/?$/, usage],
  [/^\/teams\/([^/?]+)$/, team, ["name"]],
  [/^\/planning\/?$/, planning],
  [/^\/admin\/?$/, admin],
  [/^\/signin\/?$/, signin],
];

const els = {
  main: document.getElementById("main"),
  nav: document.getElementById("nav"),
  user: document.getElementById("user"),
  status: document.getElementById("refresh-status"),
  announcer: document.getElementById("announcer"),
  pause: document.getElementById("refresh-toggle"),
};

const state = {
  who: null,
  signedIn: false,
  signinMessage: "",
  paused: false,
  generation: 0,
  timer: null,
  lastJson: null,
  lastOk: 0,
  //: How long the last load and render took (ms): polling backs off when a page is expensive.
  lastCostMs: 0,
  route: null,
  region: null,
  //: When the last refresh started (performance.now()), and a refresh on events waiting its turn.
  lastTickAt: 0,
  changeTimer: null,
  staleWhileHidden: false,
};

//: The event stream: followed while signed in; `live` once the server accepted it; `unavailable`
//: after a 404 (a server without it: poll as before).
const stream = { controller: null, live: false, unavailable: false, lastId: "" };

function parseHash() {
  const raw = window.location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = raw.split("?");
  for (const [re, view, names = []] of ROUTES) {
    const m = path.match(re);
    if (m) {
      const args = {};
      names.forEach((n, i) => (args[n] = decodeURIComponent(m[i + 1])));
      return { view, args, params: new URLSearchParams(query), path };
    }
  }
  return { view: overview, args: {}, params: new URLSearchParams(), path: "/" };
}

function context(route, region) {
  return {
    api,
    config,
    who: state.who,
    args: route.args,
    params: route.params,
    signinMessage: state.signinMessage,
    navigate: (hash) => {
      if (window.location.hash === hash) show();
      else window.location.hash = hash;
    },
    refresh: () => tick(state.generation, route, region, true),
    announce,
    signIn,
  };
}

function announce(text) {
  els.announcer.textContent = "";
  // A fresh text node makes screen readers speak the same message twice in a row, too.
  window.setTimeout(() => (els.announcer.textContent = text), 50);
}

/** Render the page for the current hash: its static header once, then its data, refreshed. */
async function show() {
  let route = parseHash();
  if (!state.signedIn && route.view !== signin) route = { ...route, view: signin };
  state.generation += 1;
  state.lastJson = null;
  window.clearTimeout(state.timer);
  state.route = route;
  const region = h("div", { class: "region" });
  state.region = region;
  const ctx = context(route, region);
  replace(els.main, route.view.header ? route.view.header(ctx) : null, region);
  document.title = `${route.view.title} · GPU Commons`;
  renderNav(route);
  await tick(state.generation, route, region, true);
  const heading = els.main.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    if (document.activeElement === document.body || !els.main.contains(document.activeElement)) heading.focus({ preventScroll: true });
  }
}

async function tick(generation, route, region, force = false) {
  window.clearTimeout(state.timer);
  const ctx = context(route, region);
  const started = performance.now();
  state.lastTickAt = started;
  try {
    const data = await route.view.load(ctx);
    if (generation !== state.generation) return; // the user went elsewhere meanwhile
    const json = JSON.stringify(data);
    if (force || json !== state.lastJson) {
      state.lastJson = json;
      rerender(region, route.view.render(data, ctx));
      route.view.afterRender?.(region);
    }
    state.lastOk = Date.now();
    state.lastCostMs = performance.now() - started;
    region.querySelector(".load-error")?.remove();
  } catch (e) {
    if (generation !== state.generation) return;
    if (e instanceof ApiError && e.status === 401) {
      signOut("Your session has ended or the token was revoked; please sign in again.");
      return;
    }
    showLoadError(region, e);
  }
  updateStatus();
  schedule(generation, route, region);
}

function schedule(generation, route, region) {
  window.clearTimeout(state.timer);
  const polled = route.view.refreshMs ?? DEFAULT_REFRESH_MS;
  const every = polled && route.view.followsEvents && stream.live ? Math.max(polled, EVENTS_SAFETY_MS) : polled;
  if (!every || state.paused || !state.signedIn) return;
  // A page that takes long to load (a big cluster, a busy server) is polled less often: the
  // dashboard never spends more than about a fifth of its time, or the server's, refreshing.
  const delay = Math.max(every, 5 * state.lastCostMs);
  state.timer = window.setTimeout(() => {
    if (document.hidden) schedule(generation, route, region); // no polling in a background tab
    else tick(generation, route, region);
  }, delay);
}

/** Something changed on the server: refresh a page that follows events, at most every EVENTS_MIN_GAP_MS. */
function changed() {
  const route = state.route;
  if (!route?.view.followsEvents || state.paused || !state.signedIn || state.changeTimer) return;
  if (document.hidden) {
    state.staleWhileHidden = true; // refreshed when the tab is shown again
    return;
  }
  const gap = Math.max(EVENTS_MIN_GAP_MS, 5 * state.lastCostMs);
  const wait = Math.max(0, state.lastTickAt + gap - performance.now());
  const generation = state.generation;
  const region = state.region;
  state.changeTimer = window.setTimeout(() => {
    state.changeTimer = null;
    if (generation === state.generation && !state.paused) tick(generation, route, region);
  }, wait);
}

function setLive(live) {
  if (stream.live === live) return;
  stream.live = live;
  // Live: poll rarely (and refresh once, for what changed before the stream opened); not: as before.
  if (live) changed();
  if (state.route && state.region && state.signedIn) schedule(state.generation, state.route, state.region);
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = window.setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (window.clearTimeout(timer), resolve()), { once: true });
  });
}

/** Follow the event stream while signed in, again from the last event each time the server ends it. */
async function followEvents() {
  if (stream.controller || stream.unavailable) return;
  const controller = new AbortController();
  stream.controller = controller;
  const { signal } = controller;
  while (state.signedIn && !signal.aborted) {
    try {
      await api.follow("/events", {
        lastId: stream.lastId,
        signal,
        onOpen: () => setLive(true),
        onMessage: (message) => {
          stream.lastId = message.id;
          changed();
        },
      });
      await pause(1000, signal); // the server ended it (its longest stream): follow it again
    } catch (e) {
      if (signal.aborted) break;
      setLive(false);
      if (e instanceof ApiError && e.status === 401) {
        signOut("Your session has ended or the token was revoked; please sign in again.");
        break;
      }
      if (e instanceof ApiError && (e.status === 404 || e.status === 405)) {
        stream.unavailable = true; // a server without the stream: the pages poll as before
        break;
      }
      await pause(EVENTS_RETRY_MS, signal);
    }
  }
  if (stream.controller === controller) stream.controller = null;
  setLive(false);
}

function stopFollowing() {
  stream.controller?.abort();
  stream.controller = null;
  setLive(false);
}

/** Swap a region's content, keeping keyboard focus on the same control if it is still there. */
function rerender(region, nodes) {
  const active = document.activeElement;
  const focusId = active && region.contains(active) ? active.id : "";
  replace(region, nodes);
  if (focusId) document.getElementById(focusId)?.focus({ preventScroll: true });
}

function showLoadError(region, e) {
  region.querySelector(".load-error")?.remove();
  const text = e instanceof ApiError ? e.explanation : String(e);
  const message =
    e instanceof ApiError && e.status === 403
      ? `You may not see this: ${text}`
      : e instanceof ApiError && e.status === 404
        ? `Not found: ${text}`
        : `Could not load this page: ${text}`;
  region.prepend(h("p", { class: "load-error callout error", role: "alert" }, message));
}

function updateStatus() {
  if (!state.signedIn) {
    els.status.textContent = "";
    return;
  }
  const every = state.route?.view.refreshMs ?? DEFAULT_REFRESH_MS;
  const age = state.lastOk ? formatDuration((Date.now() - state.lastOk) / 1000) : "never";
  const updated = `updated ${age} ago`;
  els.status.textContent = state.paused ? `Paused · ${updated}` : every ? `Live · ${updated}` : `Updated ${age} ago`;
}

function renderNav(route) {
  const links = [
    ["#/", "Overview", overview],
    ["#/tasks", "Tasks", tasks],
    ["#/submit", "Submit", submit],
    ["#/usage", "Usage & costs", usage],
    ["#/planning", "Planning", planning],
    ["#/admin", "Admin", admin],
  ];
  // Finance and people in no team see no task and submit none: no need to offer them those pages.
  const inTeams = !state.who || state.who.platform_admin || (state.who.teams || []).length > 0;
  replace(
    els.nav,
    state.signedIn
      ? h(
          "ul",
          {},
          links
            .filter(([, , view]) => inTeams || (view !== submit && view !== tasks))
            // The planning and admin pages are offered to whom the API lets read them.
            .filter(([, , view]) => view !== planning || Boolean(state.who?.platform_admin || state.who?.finance))
            .filter(([, , view]) => view !== admin || Boolean(state.who?.platform_admin))
            .map(([href, text, view]) =>
              h(
                "li",
                {},
                h("a", { href, "aria-current": route.view === view || (view === tasks && route.view === task) ? "page" : null }, text),
              ),
            ),
        )
      : null,
  );
  els.pause.hidden = !state.signedIn;
  replace(
    els.user,
    state.signedIn
      ? [
          h("span", { class: "who", id: "who" }, whoText()),
          " ",
          h("button", { type: "button", class: "secondary small", id: "signout", onclick: () => signOut("You are signed out.") }, "Sign out"),
        ]
      : null,
  );
}

function whoText() {
  const w = state.who;
  if (!w) return "Signed in";
  const name = w.display_name || w.subject || "you";
  const roles = [];
  if (w.platform_admin) roles.push("platform admin");
  if (w.finance) roles.push("finance");
  const teams = w.teams || [];
  if (teams.length) roles.push(`team${teams.length > 1 ? "s" : ""} ${teams.join(", ")}`);
  return roles.length ? `${name} · ${roles.join(" · ")}` : name;
}

/** Check the credentials we have (token, or the server's session cookie) and enter the dashboard. */
async function signIn() {
  const who = (await loadContext(api)).me; // throws ApiError(401) for bad or missing credentials
  state.who = who;
  state.signedIn = true;
  state.signinMessage = "";
  announce(`Signed in${who ? ` as ${who.display_name || who.subject}` : ""}.`);
  followEvents();
  const route = parseHash();
  if (route.view === signin) window.location.hash = "#/";
  else await show();
}

async function signOut(message) {
  const byCookie = !session.token;
  session.token = "";
  state.signedIn = false;
  state.who = null;
  state.signinMessage = message;
  window.clearTimeout(state.timer);
  stopFollowing();
  // A pasted token is only forgotten (it may be the admin token `commons up` wrote); a sign-in session
  // is ended on the server, which also clears its cookie.
  if (byCookie && config.sso_logout_url) {
    await fetch(config.sso_logout_url, { method: "POST", credentials: "same-origin" }).catch(() => null);
  }
  if (window.location.hash === "#/signin") show();
  else window.location.hash = "#/signin";
}

async function boot() {
  els.pause.addEventListener("click", () => {
    state.paused = !state.paused;
    // A toggle button: the label stays, aria-pressed (and its styling) says whether it is on.
    els.pause.setAttribute("aria-pressed", String(state.paused));
    if (!state.paused && state.route) show();
    updateStatus();
  });
  window.addEventListener("hashchange", show);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && state.staleWhileHidden) {
      state.staleWhileHidden = false;
      changed();
    }
  });
  window.setInterval(() => {
    updateStatus();
    tickAges(els.main, api.now());
  }, 1000);
  try {
    await signIn();
  } catch (e) {
    state.signedIn = false;
    if (!(e instanceof ApiError && e.status === 401)) state.signinMessage = e instanceof ApiError ? e.explanation : String(e);
    else if (session.token) state.signinMessage = "Your saved token was not accepted; please sign in again.";
    session.token = e instanceof ApiError && e.status === 401 ? "" : session.token;
    await show();
  }
}

boot();

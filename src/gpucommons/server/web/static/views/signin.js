// Sign-in: single sign-on through the directory's OpenID provider when the server offers it, or an API
// token pasted by hand (the admin token `commons up` prints, or one from `commons token create`).

import { ApiError, session } from "../api.js";
import { h } from "../dom.js";

export const title = "Sign in";
export const refreshMs = 0;

/** Whether single sign-on is on: the route exists (page config) and a provider is configured. */
export async function load(ctx) {
  if (!ctx.config.sso_login_url) return { sso: false };
  try {
    const auth = await ctx.api.get("/auth/config");
    return { sso: Boolean(auth && auth.enabled) };
  } catch {
    return { sso: false };
  }
}

function ssoHref(ctx) {
  // Back to the page the person wanted (the sign-in ends with a redirect to `next`, a local path).
  const wanted = window.location.hash && window.location.hash !== "#/signin" ? window.location.hash : "#/";
  return `${ctx.config.sso_login_url}?next=${encodeURIComponent("/" + wanted)}`;
}

export function render(data, ctx) {
  const error = h("p", { class: "form-error", role: "alert", id: "signin-error", hidden: !ctx.signinMessage }, ctx.signinMessage || "");
  const input = h("input", {
    type: "password",
    id: "token",
    name: "token",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "token-hint",
  });
  const onSubmit = async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) {
      error.textContent = "Paste a token first.";
      error.hidden = false;
      return;
    }
    session.token = token;
    try {
      await ctx.signIn();
    } catch (e) {
      session.token = "";
      error.textContent =
        e instanceof ApiError && e.status === 401
          ? "This token was not accepted: it may be mistyped, expired or revoked."
          : `Could not sign in: ${e instanceof ApiError ? e.explanation : e}`;
      error.hidden = false;
      input.focus();
    }
  };
  return [
    h("h1", {}, "Sign in to GPU Commons"),
    data.sso
      ? h(
          "section",
          { class: "card signin", "aria-labelledby": "sso-heading" },
          h("h2", { id: "sso-heading" }, "With your company account"),
          h("p", {}, h("a", { class: "button primary", href: ssoHref(ctx), id: "sso-button" }, "Sign in with single sign-on")),
        )
      : null,
    h(
      "section",
      { class: "card signin", "aria-labelledby": "token-heading" },
      h("h2", { id: "token-heading" }, "With an API token"),
      h(
        "form",
        { onsubmit: onSubmit, novalidate: true },
        h("div", { class: "field" }, h("label", { for: "token" }, "API token"), input),
        h(
          "p",
          { class: "hint muted", id: "token-hint" },
          h("code", {}, "commons up"),
          " prints the admin token and writes it to ",
          h("code", {}, "$COMMONS_HOME/admin-token"),
          "; ",
          h("code", {}, "commons token create"),
          " makes one for a user. It is kept for this browser tab only.",
        ),
        error,
        h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary", id: "signin-button" }, "Sign in with this token")),
      ),
    ),
  ];
}

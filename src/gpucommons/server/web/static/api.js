// The dashboard's only way to the server: the public REST API under /api/v1, with the caller's bearer
// token. The dashboard has no privileges of its own; whatever the API hides from a caller (other teams'
// tasks, logs, costs) the dashboard never receives.

const TOKEN_KEY = "commons.token";

/** The bearer token lives in sessionStorage: it survives a reload, dies with the tab. */
export const session = {
  get token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch {
      return "";
    }
  },
  set token(value) {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage disabled: the token lives only as long as this page */
    }
  },
};

/** An error answer of the API: `{"error": {"code", "message", "details"}}`, or a network failure. */
export class ApiError extends Error {
  constructor(status, code, message, details = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }

  /** One line for a person. The server's message already names each wrong field; list them only if it is empty. */
  get explanation() {
    if (this.message) return this.message;
    const errors = Array.isArray(this.details?.errors) ? this.details.errors : [];
    return errors.map((e) => (typeof e === "string" ? e : `${e.field || e.path || ""}: ${e.message || e.msg}`)).join("; ");
  }
}

export class Api {
  constructor(base = "/api/v1") {
    this.base = base;
    //: Server clock minus browser clock (ms), from the Date header, so task ages are right.
    this.clockSkewMs = 0;
  }

  now() {
    return Date.now() + this.clockSkewMs;
  }

  /** The caller's credentials, for requests made outside `request` (file downloads). */
  authHeaders() {
    return session.token ? { Authorization: `Bearer ${session.token}` } : {};
  }

  /**
   * `path` is relative to the API base (`/tasks`), or absolute when `absolute` is set (`/ui/api/context`).
   * A query value that is an array repeats its key (`state=pending&state=running`).
   */
  async request(method, path, { body, query, accept = "application/json", absolute = false, raw = false } = {}) {
    const url = new URL((absolute ? "" : this.base) + path, window.location.origin);
    for (const [k, v] of Object.entries(query || {})) {
      for (const one of Array.isArray(v) ? v : [v]) {
        if (one !== undefined && one !== null && one !== "") url.searchParams.append(k, String(one));
      }
    }
    const headers = { Accept: accept, ...this.authHeaders() };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
        // Revalidate every time: the browser sends If-None-Match, the server answers 304 when the
        // list did not change, and fetch hands back the body it already has.
        cache: "no-cache",
      });
    } catch (e) {
      throw new ApiError(0, "network", `The server did not answer (${e.message}). Is commons up running?`);
    }
    const date = response.headers.get("Date");
    if (date) {
      const server = Date.parse(date);
      // The Date header has 1 s resolution: ignore differences below that.
      if (!Number.isNaN(server) && Math.abs(server - Date.now()) > 1500) this.clockSkewMs = server - Date.now();
    }
    const type = response.headers.get("Content-Type") || "";
    if (raw && response.ok) return response;
    const payload = type.includes("json") ? await response.json().catch(() => null) : await response.text();
    if (!response.ok) {
      const err = payload && typeof payload === "object" ? payload.error : null;
      if (err && typeof err === "object") {
        throw new ApiError(response.status, err.code || "error", err.message || response.statusText, err.details || {});
      }
      const detail = typeof payload === "string" && payload.length < 300 ? payload : response.statusText;
      throw new ApiError(response.status, "http_" + response.status, `HTTP ${response.status}: ${detail}`);
    }
    return payload;
  }

  get(path, query) {
    return this.request("GET", path, { query });
  }

  /**
   * Follow a server-sent-events stream (`/events`) until it ends: `onOpen()` once the server accepted
   * it, `onMessage({id, event, data})` per message. Read with fetch rather than `EventSource`, which
   * cannot send the pasted token's Authorization header. Resolves when the server ends the stream;
   * throws an `ApiError` for an error answer (404 from a server without the stream) and an
   * `AbortError` when `signal` aborts. Lines end with LF (CR LF too), as the server writes them.
   */
  async follow(path, { query, lastId = "", signal, onOpen, onMessage } = {}) {
    const url = new URL(this.base + path, window.location.origin);
    for (const [k, v] of Object.entries(query || {})) if (v) url.searchParams.set(k, String(v));
    const headers = { Accept: "text/event-stream", ...this.authHeaders() };
    if (lastId) headers["Last-Event-ID"] = lastId;
    let response;
    try {
      response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store", signal });
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError(0, "network", `The server did not answer (${e.message}).`);
    }
    if (!response.ok || !response.body) {
      await response.text().catch(() => "");
      throw new ApiError(response.status, "http_" + response.status, `HTTP ${response.status}`);
    }
    onOpen?.();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let message = { id: lastId, event: "", data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop();
      for (const raw of lines) {
        const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
        if (line === "") {
          if (message.data.length) onMessage?.({ id: message.id, event: message.event || "message", data: message.data.join("\n") });
          message = { id: message.id, event: "", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let field = colon < 0 ? "" : line.slice(colon + 1);
        if (field.startsWith(" ")) field = field.slice(1);
        if (name === "data") message.data.push(field);
        else if (name === "event") message.event = field;
        else if (name === "id" && !field.includes("\0")) message.id = field;
      }
    }
  }

  post(path, body) {
    return this.request("POST", path, { body: body === undefined ? {} : body });
  }
}

/** Lists may come bare or wrapped (`{"items": [...]}`) depending on the endpoint; accept both. */
export function items(payload) {
  if (Array.isArray(payload)) return payload;
  if (payload && Array.isArray(payload.items)) return payload.items;
  return [];
}

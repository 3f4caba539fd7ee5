/*
 * The API client and the poll loop.
 *
 * api() never throws: failures come back as {ok: false, status, data: {code, detail}}. The poll
 * loop asks for a session with If-None-Match (650 ms while a run is live, 5 s for the active tab
 * when idle, not at all for idle background tabs) and hands 200s, 304s and failures to the
 * callbacks the sidebar gives it.
 */

import { gettext } from "./i18n.js";

export const LIVE = ["running", "awaiting_human", "awaiting_browser"];

export function isLive(payload) {
  return !!payload && LIVE.includes(payload.status);
}

export function sessionPath(id, rest) {
  return "sessions/" + encodeURIComponent(id) + (rest ? "/" + rest : "");
}

export function createClient(config) {
  let serverSkewMs = 0; // server clock minus ours, from the Date header

  function csrfToken() {
    // The cookie is current even after a login in another tab rotated the token.
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : config.csrf;
  }

  function noteServerClock(response) {
    const date = Date.parse(response.headers.get("Date") || "");
    if (Number.isNaN(date)) return;
    const skew = date - Date.now();
    // The header has one-second resolution: ignore noise, keep real clock differences.
    serverSkewMs = Math.abs(skew) > 2000 ? skew : 0;
  }

  async function api(method, path, body, options) {
    const headers = { Accept: "application/json", "X-CSRFToken": csrfToken() };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (options && options.etag) headers["If-None-Match"] = options.etag;
    let response;
    try {
      response = await fetch(config.api + path, {
        method,
        headers,
        credentials: "same-origin",
        cache: "no-store", // our own If-None-Match does the caching
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      return { ok: false, status: 0, data: { code: "ahentic_network", detail: gettext("Network error.") } };
    }
    noteServerClock(response);
    let data = null;
    if (response.status !== 204 && response.status !== 304) {
      data = await response.json().catch(() => null);
    }
    const ok = response.ok || response.status === 304;
    if (!ok && !(data && data.code)) {
      data = {
        code: "ahentic_http_" + response.status,
        detail: gettext("Request failed (%(status)s).", { status: response.status }),
      };
    }
    return {
      ok,
      status: response.status,
      data,
      etag: response.headers.get("ETag"),
      // The session's last heartbeat: bookkeeping that does not move the ETag, so it comes in
      // a header on the 304 as on the 200 (stall detection reads it).
      heartbeat: response.headers.get("X-Ahentic-Heartbeat"),
      // Whether a worker holds the run's lease ("1"/"0"): bookkeeping too, same reason.
      claimed: response.headers.get("X-Ahentic-Claimed"),
    };
  }

  /** Milliseconds since a server timestamp, on the server's clock; null when unparsable. */
  function ageMs(iso) {
    const at = Date.parse(iso || "");
    return Number.isNaN(at) ? null : Date.now() + serverSkewMs - at;
  }

  return { api, ageMs };
}

/**
 * The poll loop for every open session. `hooks`:
 *   isOpen(s), isActive(s): whether the session has a tab / is the shown one;
 *   onPayload(s, payload, etag), onNotModified(s), onGone(s), onError(s, data).
 */
export function createPoller(config, client, hooks) {
  function delay(s) {
    if (!hooks.isOpen(s)) return null; // closed tab
    if (isLive(s.payload) || Date.now() < s.fastUntil) return config.pollMs;
    if (hooks.isActive(s)) return config.idlePollMs;
    return null; // idle background tabs wait until they are shown
  }

  function schedule(s, wait) {
    clearTimeout(s.timer);
    s.timer = null;
    const ms = wait === undefined ? delay(s) : wait;
    if (ms == null) return;
    s.timer = setTimeout(() => poll(s), ms);
  }

  /** Poll now and keep polling fast for a while, even if a raced poll says idle. */
  function soon(s) {
    s.fastUntil = Date.now() + config.fastAfterActionMs;
    schedule(s, 0);
  }

  async function poll(s) {
    if (s.polling) return;
    s.polling = true;
    const result = await client.api("GET", sessionPath(s.id), undefined, { etag: s.etag });
    s.polling = false;
    if (!hooks.isOpen(s)) return; // closed while the request was out
    if (result.status === 200) {
      s.pollFailures = 0;
      if (result.heartbeat && result.data) result.data.heartbeatAt = result.heartbeat;
      if (result.claimed && result.data) result.data.claimed = result.claimed === "1";
      hooks.onPayload(s, result.data, result.etag);
    } else if (result.status === 304) {
      s.pollFailures = 0;
      if (result.heartbeat && s.payload) s.payload.heartbeatAt = result.heartbeat;
      if (result.claimed && s.payload) s.payload.claimed = result.claimed === "1";
      hooks.onNotModified(s);
    } else if (result.status === 404) {
      hooks.onGone(s);
      return;
    } else {
      s.pollFailures += 1;
      hooks.onError(s, result.data);
      // Back off while the server is unreachable; recover at the normal pace afterwards.
      schedule(s, Math.min(config.pollMs * 2 ** s.pollFailures, 15000));
      return;
    }
    schedule(s);
  }

  return { schedule, soon };
}

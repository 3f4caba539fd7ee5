/*
 * django-ahentic chat sidebar. Vanilla JS, no build step, no dependencies.
 *
 * The server drives the agent; this file only shows a session and answers it: it polls the
 * session payload (ETag + If-None-Match, 650 ms while a run is live), posts messages,
 * approvals, stops and continues, and runs the browser tools (page_read, page_fill_fields) in
 * the page. Every piece of user, model or tool text is rendered with textContent: nothing
 * from the API is ever parsed as HTML.
 *
 * Several windows may show the same chat. One of them holds a localStorage "runner" claim per
 * session (1 s heartbeat, stale after 15 s) and is the only one that runs browser tools and
 * nudges a stalled run; the others watch. Sending or approving from a window moves the claim
 * there, because the user is now looking at that page.
 *
 * Host pages may add browser tools of their own:
 *   window.AhenticSidebar.registerBrowserTool("editor_insert", async (input) => ({ok: true}));
 */
(function () {
  "use strict";

  const root = document.getElementById("ahentic-sidebar");
  if (!root || root.dataset.ready === "1") return; // the tag rendered twice: the first one wins
  root.dataset.ready = "1";

  const LIVE = ["running", "awaiting_human", "awaiting_browser"];
  // Browser-result answers that mean "another window (or an earlier try) already answered".
  const ALREADY_HANDLED = ["ahentic_not_awaiting", "ahentic_no_pending", "ahentic_call_mismatch"];
  const TOKEN_BUDGET_CODE = "ahentic_session_token_budget";

  const config = {
    api: root.dataset.api || "/ahentic/v1/",
    csrf: root.dataset.csrf || "",
    pollMs: Number(root.dataset.pollMs) || 650,
    idlePollMs: 5000, // the active tab's idle session: cheap 304s, picks up other windows' work
    fastAfterActionMs: 4000, // keep polling fast this long after a send, even if a poll says idle
    browserTimeoutMs: (Number(root.dataset.browserTimeoutS) || 45) * 1000,
    stallNudgeMs: 8000, // running without a heartbeat this long: POST continue (runner only)
    stuckMs: 45000, // ... this long: tell the user the run may be stuck
    runnerHeartbeatMs: 1000,
    runnerStaleMs: 15000,
    browserAttempts: 5,
    browserBackoffMs: 400,
    pageTextLimit: 4000,
    diagnosticsRefreshMs: 1500,
    inAdmin: root.dataset.admin === "1",
    storagePrefix: "ahentic:v1:" + (root.dataset.user || "anonymous") + ":",
  };
  const windowId = Math.random().toString(36).slice(2) + Date.now().toString(36);

  const ui = {};
  root.querySelectorAll("[data-role]").forEach((node) => {
    ui[camel(node.dataset.role)] = node;
  });

  const state = {
    tabs: [], // [{id, title, autoTitle}] open tabs, persisted
    active: null, // id of the active tab
    sessions: new Map(), // id -> per-session client state (see sessionState)
    collapsed: false,
    debugOpen: false,
    diagnostics: null,
    diagnosticsAt: 0,
    history: [],
    error: null, // an error with no chat to show it in
  };
  const handledBrowserCalls = new Set(); // "sessionId:callId" already run in this window
  const browserTools = Object.create(null);
  let serverSkewMs = 0; // server clock minus ours, from the Date header

  // ------------------------------------------------------------------ small helpers

  function camel(name) {
    return name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  }

  /** Build an element. Strings among children become text nodes (never HTML). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value == null || value === false) continue;
      if (key === "className") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child != null && child !== false) node.append(child);
    }
    return node;
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  /** Replace a node's children; null/false entries are skipped (replaceChildren would print
   * them as the text "null"). */
  function fill(node, ...children) {
    node.replaceChildren(...children.flat().filter((child) => child != null && child !== false));
  }

  const renderKeys = new WeakMap();

  /** True when a region must be rebuilt: what it shows changed since the last render. Skipping
   * identical rebuilds keeps keyboard focus and open <details> across 650 ms polls. */
  function changed(node, key) {
    if (renderKeys.get(node) === key) return false;
    renderKeys.set(node, key);
    return true;
  }

  function formatTokens(n) {
    n = Number(n) || 0;
    if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
    return String(n);
  }

  function formatBytes(n) {
    n = Number(n) || 0;
    if (n >= 1048576) return (n / 1048576).toFixed(1) + " MB";
    if (n >= 1024) return (n / 1024).toFixed(1) + " KB";
    return n + " B";
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  function serverNow() {
    return Date.now() + serverSkewMs;
  }

  function ageMs(iso) {
    const at = Date.parse(iso || "");
    return Number.isNaN(at) ? null : serverNow() - at;
  }

  function isLive(payload) {
    return !!payload && LIVE.includes(payload.status);
  }

  // ------------------------------------------------------------------ localStorage

  const storage = {
    read(key, fallback) {
      try {
        const raw = window.localStorage.getItem(config.storagePrefix + key);
        return raw ? JSON.parse(raw) : fallback;
      } catch (err) {
        return fallback; // storage disabled or a corrupt value: start fresh
      }
    },
    write(key, value) {
      try {
        window.localStorage.setItem(config.storagePrefix + key, JSON.stringify(value));
      } catch (err) {
        /* quota or privacy mode: the sidebar still works, it just forgets */
      }
    },
    remove(key) {
      try {
        window.localStorage.removeItem(config.storagePrefix + key);
      } catch (err) {
        /* as above */
      }
    },
  };

  function saveTabs() {
    storage.write("tabs", { open: state.tabs, active: state.active });
  }

  function saveUi() {
    storage.write(config.inAdmin ? "ui-admin" : "ui", {
      collapsed: state.collapsed,
      debugOpen: state.debugOpen,
    });
  }

  // ------------------------------------------------------------------ runner claim

  /** One window per session runs its browser tools and stall nudges (see the header). */
  const runner = {
    key(id) {
      return "runner:" + id;
    },
    isMine(id) {
      const claim = storage.read(this.key(id), null);
      return !!claim && claim.owner === windowId && Date.now() - claim.at < config.runnerStaleMs;
    },
    claim(id, force) {
      const claim = storage.read(this.key(id), null);
      const free =
        !claim || claim.owner === windowId || Date.now() - claim.at >= config.runnerStaleMs;
      if (force || free) storage.write(this.key(id), { owner: windowId, at: Date.now() });
      return this.isMine(id);
    },
    release(id) {
      const claim = storage.read(this.key(id), null);
      if (claim && claim.owner === windowId) storage.remove(this.key(id));
    },
  };

  // ------------------------------------------------------------------ API

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

  /** Call the API. Never throws: failures come back as {ok: false, status, data: {code, detail}}. */
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
      return { ok: false, status: 0, data: { code: "ahentic_network", detail: "Network error." } };
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
        detail: "Request failed (" + response.status + ").",
      };
    }
    return { ok, status: response.status, data, etag: response.headers.get("ETag") };
  }

  function sessionPath(id, rest) {
    return "sessions/" + encodeURIComponent(id) + (rest ? "/" + rest : "");
  }

  // ------------------------------------------------------------------ per-session state

  function sessionState(id) {
    let s = state.sessions.get(id);
    if (!s) {
      s = {
        id,
        payload: null,
        etag: null,
        timer: null,
        polling: false,
        pollFailures: 0,
        fastUntil: 0,
        localMessages: [], // optimistic user bubbles until the server transcript has them
        recalled: new Set(), // pending message ids being recalled
        approving: null, // callId of an approval in flight
        stopping: false,
        stoppedAt: 0, // browser results started before this are dropped (Stop cancels them)
        nudgedHeartbeat: null,
        nudgedBrowserPause: null,
        nudging: false,
        older: [], // messages loaded with "Load earlier messages"
        nodes: new Map(), // rendered message nodes by viewMode:id (messages never change)
        error: null,
      };
      state.sessions.set(id, s);
    }
    return s;
  }

  function activeSession() {
    return state.active ? sessionState(state.active) : null;
  }

  function tabOf(id) {
    return state.tabs.find((tab) => tab.id === id) || null;
  }

  /** Apply a session payload from a poll or a mutating call. Older versions are ignored. */
  function applyPayload(s, payload, etag) {
    if (!payload || !payload.id) return;
    // A slow response can arrive after a newer one: the payload version only grows.
    if (s.payload && payload.version < s.payload.version) return;
    if (s.payload && s.payload.viewMode !== payload.viewMode) s.older = [];
    s.payload = payload;
    if (etag) s.etag = etag;
    s.pollFailures = 0;
    for (const id of [...s.recalled]) {
      if (!payload.pendingMessages.some((m) => m.id === id)) s.recalled.delete(id);
    }
    reconcileLocalMessages(s);
    const tab = tabOf(s.id);
    if (tab && (tab.title !== payload.title || tab.autoTitle !== payload.autoTitle)) {
      tab.title = payload.title;
      tab.autoTitle = payload.autoTitle;
      saveTabs();
    }
    renderTabs();
    if (s.id === state.active) renderSession();
    actAsRunner(s);
  }

  /** Drop optimistic bubbles the server now shows (in the transcript or as queued messages). */
  function reconcileLocalMessages(s) {
    const p = s.payload;
    s.localMessages = s.localMessages.filter((local) => {
      const inTranscript = p.messages.some(
        (m) => m.role === "user" && m.seq > local.afterSeq && m.content.trim() === local.content,
      );
      const queued = p.pendingMessages.some((m) => m.content.trim() === local.content);
      return !inTranscript && !queued;
    });
  }

  function lastSeq(s) {
    const messages = s.payload ? s.payload.messages : [];
    return messages.length ? messages[messages.length - 1].seq : -1;
  }

  // ------------------------------------------------------------------ polling

  function pollDelay(s) {
    if (!tabOf(s.id)) return null; // closed tab
    if (isLive(s.payload) || Date.now() < s.fastUntil) return config.pollMs;
    if (s.id === state.active) return config.idlePollMs;
    return null; // idle background tabs wait until they are shown
  }

  function schedulePoll(s, delay) {
    clearTimeout(s.timer);
    s.timer = null;
    const wait = delay === undefined ? pollDelay(s) : delay;
    if (wait == null) return;
    s.timer = setTimeout(() => poll(s), wait);
  }

  function pollSoon(s) {
    s.fastUntil = Date.now() + config.fastAfterActionMs;
    schedulePoll(s, 0);
  }

  async function poll(s) {
    if (s.polling) return;
    s.polling = true;
    const result = await api("GET", sessionPath(s.id), undefined, { etag: s.etag });
    s.polling = false;
    if (!tabOf(s.id)) return; // closed while the request was out
    if (result.status === 200) {
      applyPayload(s, result.data, result.etag);
      if (s.error && s.error.fromPoll) setError(s, null);
    } else if (result.status === 304) {
      // Nothing changed, but time-based duties (stall nudge, "may be stuck") still advance.
      if (s.payload) actAsRunner(s);
      if (s.id === state.active) renderBanner(s);
    } else if (result.status === 404) {
      closeTab(s.id);
      setError(null, { code: "ahentic_session_not_found", detail: "That chat no longer exists." });
      return;
    } else {
      s.pollFailures += 1;
      setError(s, Object.assign({ fromPoll: true }, result.data));
      // Back off while the server is unreachable; recover at the normal pace afterwards.
      schedulePoll(s, Math.min(config.pollMs * 2 ** s.pollFailures, 15000));
      return;
    }
    schedulePoll(s);
  }

  // ------------------------------------------------------------------ runner duties

  function actAsRunner(s) {
    const p = s.payload;
    if (!p || !tabOf(s.id) || !runner.claim(s.id)) return;
    if (p.status === "awaiting_browser" && p.pendingTool && p.pendingTool.runtime === "browser") {
      runBrowserTool(s, p.pendingTool);
      const paused = ageMs(p.browserPausedAt || (p.progress && p.progress.updatedAt));
      if (
        paused != null &&
        paused >= config.browserTimeoutMs &&
        s.nudgedBrowserPause !== p.browserPausedAt
      ) {
        // The tool never answered (the page that should run it is gone): let the server
        // give the model a timeout error instead of waiting forever.
        s.nudgedBrowserPause = p.browserPausedAt;
        nudgeContinue(s);
      }
    } else if (p.status === "running") {
      const quiet = ageMs(p.heartbeatAt || p.modifiedAt);
      if (quiet != null && quiet >= config.stallNudgeMs && s.nudgedHeartbeat !== p.heartbeatAt) {
        // Quiet stall nudge: once per heartbeat value; the server re-enqueues the step only
        // when the worker's lease really expired, so an early nudge is harmless.
        s.nudgedHeartbeat = p.heartbeatAt;
        nudgeContinue(s);
      }
    }
  }

  async function nudgeContinue(s) {
    if (s.nudging) return;
    s.nudging = true;
    const result = await api("POST", sessionPath(s.id, "continue"), {});
    s.nudging = false;
    if (result.ok) applyPayload(s, result.data, result.etag);
  }

  // ------------------------------------------------------------------ browser tools

  const SKIP_TEXT_TAGS = new Set([
    "SCRIPT",
    "STYLE",
    "NOSCRIPT",
    "TEMPLATE",
    "IFRAME",
    "CANVAS",
    "SVG",
    "TEXTAREA",
    "SELECT",
    "OPTION",
    "INPUT",
    "BUTTON",
  ]);
  const NOT_FILLABLE_TYPES = new Set(["hidden", "submit", "button", "reset", "image", "file"]);
  // The server's rule (orchestrator_app/tools/browser_tools.py), served by the template tag.
  const SENSITIVE = new RegExp(root.dataset.sensitiveFields || "pass|secret|token", "i");
  const SENSITIVE_AUTOCOMPLETE = new RegExp(root.dataset.sensitiveAutocomplete || "password", "i");

  function collapse(text) {
    return (text || "").replace(/\s+/g, " ").trim();
  }

  function inSidebar(node) {
    return root.contains(node);
  }

  function isHidden(element) {
    if (element.hidden || element.getAttribute("aria-hidden") === "true") return true;
    if (typeof element.checkVisibility === "function" && !element.checkVisibility()) {
      // checkVisibility() is also false for display:contents wrappers, whose children show.
      return window.getComputedStyle(element).display !== "contents";
    }
    return false;
  }

  /** Visible text of a subtree (the sidebar excluded), whitespace collapsed, cut at limit. */
  function visibleText(scope, limit) {
    const walker = document.createTreeWalker(
      scope,
      NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT,
      {
        acceptNode(node) {
          if (node.nodeType === Node.TEXT_NODE) return NodeFilter.FILTER_ACCEPT;
          if (node === root || SKIP_TEXT_TAGS.has(node.tagName.toUpperCase()) || isHidden(node)) {
            return NodeFilter.FILTER_REJECT;
          }
          return NodeFilter.FILTER_SKIP;
        },
      },
    );
    const parts = [];
    let length = 0;
    let node;
    while ((node = walker.nextNode())) {
      const text = collapse(node.nodeValue);
      if (!text) continue;
      parts.push(text);
      length += text.length + 1;
      if (length > limit) break;
    }
    const text = parts.join(" ");
    return { text: text.slice(0, limit), truncated: text.length > limit };
  }

  function labelOf(field) {
    const label = field.labels && field.labels.length ? collapse(field.labels[0].textContent) : "";
    if (label) return label;
    const labelledBy = field.getAttribute("aria-labelledby");
    if (labelledBy) {
      const text = labelledBy
        .split(/\s+/)
        .map((id) => document.getElementById(id))
        .filter(Boolean)
        .map((node) => collapse(node.textContent))
        .join(" ");
      if (text) return text;
    }
    return (
      field.getAttribute("aria-label") || field.getAttribute("placeholder") || field.title || ""
    );
  }

  function isSensitiveField(field) {
    const type = (field.type || "").toLowerCase();
    return (
      type === "password" ||
      SENSITIVE.test(field.name || "") ||
      SENSITIVE.test(field.id || "") ||
      SENSITIVE_AUTOCOMPLETE.test(field.getAttribute("autocomplete") || "")
    );
  }

  function describeField(field) {
    const tag = field.tagName.toLowerCase();
    const type = tag === "input" ? (field.type || "text").toLowerCase() : tag;
    const info = { type };
    if (field.name) info.name = field.name;
    if (field.id) info.id = field.id;
    const label = labelOf(field);
    if (label) info.label = label.slice(0, 200);
    if (field.required) info.required = true;
    if (field.disabled) info.disabled = true;
    if (field.readOnly) info.readonly = true;
    if (type === "checkbox" || type === "radio") {
      info.checked = field.checked;
      if (field.value && field.value !== "on") info.value = field.value;
    } else if (tag === "select") {
      info.value = field.value;
      info.options = Array.from(field.options)
        .slice(0, 30)
        .map((option) => ({ value: option.value, text: collapse(option.text) }));
    } else if (type === "file") {
      // never a path
    } else if (isSensitiveField(field)) {
      info.sensitive = true; // the value of a password or secret field never leaves the page
    } else {
      info.value = String(field.value || "").slice(0, 500);
    }
    return info;
  }

  function pageFields(scope) {
    return Array.from(scope.querySelectorAll("input, textarea, select"))
      .filter((field) => !inSidebar(field))
      .filter(
        (field) => !(field.tagName === "INPUT" && (field.type || "").toLowerCase() === "hidden"),
      )
      .slice(0, 100)
      .map(describeField);
  }

  function pageHeadings(scope) {
    return Array.from(scope.querySelectorAll("h1, h2, h3, h4, h5, h6"))
      .filter((heading) => !inSidebar(heading) && !isHidden(heading))
      .slice(0, 50)
      .map((heading) => ({
        level: Number(heading.tagName[1]),
        text: collapse(heading.textContent).slice(0, 200),
      }))
      .filter((heading) => heading.text);
  }

  function pageRead(input) {
    let scope = document.body;
    if (input && input.selector) {
      let found;
      try {
        found = document.querySelector(input.selector);
      } catch (err) {
        throw new Error("Invalid CSS selector: " + input.selector);
      }
      if (!found || inSidebar(found))
        throw new Error("No element on the page matches " + input.selector);
      scope = found;
    }
    const { text, truncated } = visibleText(scope, config.pageTextLimit);
    const result = {
      ok: true,
      url: window.location.href,
      title: document.title,
      headings: pageHeadings(scope),
      text,
      textTruncated: truncated,
      fields: pageFields(scope),
    };
    if (input && input.selector) result.selector = input.selector;
    return result;
  }

  function isFillable(field) {
    if (!field || inSidebar(field)) return false;
    if (!/^(INPUT|TEXTAREA|SELECT)$/.test(field.tagName)) return false;
    return !(field.tagName === "INPUT" && NOT_FILLABLE_TYPES.has((field.type || "").toLowerCase()));
  }

  function findFields(key) {
    const named = Array.from(document.getElementsByName(key)).filter(isFillable);
    if (named.length) return named;
    const byId = document.getElementById(key);
    return isFillable(byId) ? [byId] : [];
  }

  function truthy(value) {
    return value === true || value === 1 || /^(true|1|on|yes|checked)$/i.test(String(value));
  }

  function announce(field) {
    // Frameworks (React, Vue...) listen for these; nothing here ever submits the form.
    field.dispatchEvent(new Event("input", { bubbles: true }));
    field.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function setNativeValue(field, value) {
    // Set through the prototype's setter so frameworks that wrap .value notice the change.
    const prototype = Object.getPrototypeOf(field);
    const descriptor = Object.getOwnPropertyDescriptor(prototype, "value");
    if (descriptor && descriptor.set) descriptor.set.call(field, value);
    else field.value = value;
  }

  function fillField(fields, value) {
    const first = fields[0];
    if (first.disabled) throw new Error("the field is disabled");
    if (first.readOnly) throw new Error("the field is read-only");
    const type = (first.type || "").toLowerCase();
    if (type === "radio") {
      const match = fields.find((field) => field.value === String(value));
      if (!match) throw new Error("no option with the value " + JSON.stringify(String(value)));
      match.checked = true;
      announce(match);
    } else if (type === "checkbox") {
      const target =
        fields.length > 1 ? fields.find((field) => field.value === String(value)) : first;
      if (!target) throw new Error("no checkbox with the value " + JSON.stringify(String(value)));
      target.checked = fields.length > 1 ? true : truthy(value);
      announce(target);
    } else if (first.tagName === "SELECT") {
      const wanted = String(value);
      const option = Array.from(first.options).find(
        (o) => o.value === wanted || collapse(o.text).toLowerCase() === wanted.toLowerCase(),
      );
      if (!option) throw new Error("no option " + JSON.stringify(wanted));
      setNativeValue(first, option.value);
      announce(first);
    } else {
      setNativeValue(first, String(value));
      announce(first);
    }
  }

  function pageFillFields(input) {
    const filled = [];
    const notFound = [];
    const failed = {};
    for (const [key, value] of Object.entries((input && input.fields) || {})) {
      const fields = findFields(key);
      if (!fields.length) {
        notFound.push(key);
        continue;
      }
      try {
        fillField(fields, value);
        filled.push(key);
      } catch (err) {
        failed[key] = err.message;
      }
    }
    const ok = notFound.length === 0 && Object.keys(failed).length === 0;
    const result = { ok, filled, submitted: false };
    if (notFound.length) result.notFound = notFound;
    if (Object.keys(failed).length) result.failed = failed;
    if (!ok) {
      result.error = "fields_not_filled";
      result.message =
        "Some fields were not filled; see notFound and failed. Nothing was submitted.";
    }
    return result;
  }

  browserTools.page_read = pageRead;
  browserTools.page_fill_fields = pageFillFields;

  async function runBrowserTool(s, pendingTool) {
    const key = s.id + ":" + pendingTool.callId;
    if (handledBrowserCalls.has(key)) return;
    handledBrowserCalls.add(key);
    const startedAt = Date.now();
    const body = { callId: pendingTool.callId };
    const handler = browserTools[pendingTool.name];
    if (pendingTool.memoryError) {
      body.error = pendingTool.memoryError;
    } else if (!handler) {
      body.error = "This page cannot run the browser tool " + pendingTool.name + ".";
    } else {
      try {
        body.result = await handler(pendingTool.input || {});
      } catch (err) {
        body.error = (err && err.message) || String(err);
      }
    }
    if ("result" in body && body.result === undefined) body.result = null;
    await postBrowserResult(s, body, startedAt);
  }

  async function postBrowserResult(s, body, startedAt) {
    for (let attempt = 1; attempt <= config.browserAttempts; attempt += 1) {
      if (s.stoppedAt >= startedAt || !tabOf(s.id)) return; // Stop cancels in-flight resumes
      const result = await api("POST", sessionPath(s.id, "browser-results"), body);
      if (result.ok) {
        applyPayload(s, result.data, result.etag);
        return;
      }
      const code = result.data && result.data.code;
      if (result.status === 409 || ALREADY_HANDLED.includes(code)) {
        pollSoon(s); // someone already answered: show what happened
        return;
      }
      const retryable = result.status === 0 || result.status === 429 || result.status >= 500;
      if (!retryable || attempt === config.browserAttempts) {
        setError(s, result.data);
        return;
      }
      await sleep(config.browserBackoffMs * attempt);
    }
  }

  // ------------------------------------------------------------------ actions

  /** Show an API error ({code, detail}) on a chat's inline error line; null clears it. */
  function setError(s, error) {
    const target = s || activeSession();
    if (target) target.error = error;
    else state.error = error; // no chat open yet (creating the first one failed)
    if (!target || target.id === state.active) renderError();
  }

  function clearError() {
    setError(activeSession(), null);
  }

  function pageContext() {
    return { url: window.location.href, title: document.title };
  }

  async function createSession() {
    const result = await api("POST", "sessions", {});
    if (!result.ok) {
      setError(null, result.data);
      return null;
    }
    const s = sessionState(result.data.id);
    openTab({ id: result.data.id, title: result.data.title, autoTitle: result.data.autoTitle });
    applyPayload(s, result.data, result.etag);
    return s;
  }

  function openTab(tab) {
    if (!tabOf(tab.id)) {
      state.tabs.push({
        id: tab.id,
        title: tab.title || "New Agent",
        autoTitle: tab.autoTitle !== false,
      });
    }
    activate(tab.id);
  }

  function activate(id) {
    state.active = id;
    saveTabs();
    const s = sessionState(id);
    renderTabs();
    renderSession();
    schedulePoll(s, 0);
  }

  function closeTab(id) {
    const s = state.sessions.get(id);
    if (s) clearTimeout(s.timer);
    state.sessions.delete(id);
    runner.release(id);
    const index = state.tabs.findIndex((tab) => tab.id === id);
    if (index === -1) return;
    state.tabs.splice(index, 1);
    if (state.active === id) {
      const next = state.tabs[Math.min(index, state.tabs.length - 1)];
      state.active = next ? next.id : null;
    }
    saveTabs();
    if (state.active) activate(state.active);
    else {
      renderTabs();
      renderSession();
    }
  }

  async function send() {
    const content = ui.input.value.trim();
    if (!content) return;
    clearError();
    const s = activeSession() || (await createSession());
    if (!s) return;
    runner.claim(s.id, true); // the user is on this page now: its window runs the page tools
    ui.input.value = "";
    const local = { localId: "local_u_" + Date.now(), content, afterSeq: lastSeq(s) };
    s.localMessages.push(local);
    renderSession();
    pollSoon(s); // poll right after a send, even if a raced poll says idle
    const result = await api("POST", sessionPath(s.id, "messages"), {
      content,
      pageContext: pageContext(),
    });
    if (!result.ok) {
      s.localMessages = s.localMessages.filter((m) => m !== local);
      if (!ui.input.value) ui.input.value = content; // give the text back to fix and resend
      setError(s, result.data);
      renderSession();
      return;
    }
    applyPayload(s, result.data, result.etag);
    pollSoon(s);
  }

  async function stop() {
    const s = activeSession();
    if (!s) return;
    // Stop shows idle at once and drops browser results still being posted.
    s.stopping = true;
    s.stoppedAt = Date.now();
    renderSession();
    const result = await api("POST", sessionPath(s.id, "cancel"), {});
    s.stopping = false;
    if (result.ok) applyPayload(s, result.data, result.etag);
    else setError(s, result.data);
    renderSession();
    pollSoon(s);
  }

  async function continueRun(s) {
    clearError();
    runner.claim(s.id, true);
    const result = await api("POST", sessionPath(s.id, "continue"), {});
    if (result.ok) applyPayload(s, result.data, result.etag);
    else setError(s, result.data);
    pollSoon(s);
  }

  async function decide(s, decision, reason) {
    const pendingTool = s.payload && s.payload.pendingTool;
    if (!pendingTool) return;
    clearError();
    runner.claim(s.id, true);
    s.approving = pendingTool.callId;
    renderHitl(s);
    const body = { decision };
    if (decision === "deny" && reason) body.reason = reason;
    pollSoon(s);
    const result = await api("POST", sessionPath(s.id, "approvals"), body);
    s.approving = null;
    if (result.ok) applyPayload(s, result.data, result.etag);
    else if (result.status !== 409) setError(s, result.data); // 409: already decided elsewhere
    renderSession();
    pollSoon(s);
  }

  async function recall(s, pendingId) {
    clearError();
    s.recalled.add(pendingId);
    renderPending(s);
    const result = await api("DELETE", sessionPath(s.id, "pending-messages/" + pendingId));
    if (!result.ok) {
      s.recalled.delete(pendingId);
      setError(s, result.data); // 404: it was already sent to the agent
    }
    pollSoon(s);
  }

  async function changeViewMode(viewMode) {
    const s = activeSession();
    if (!s) return;
    const result = await api("PATCH", sessionPath(s.id), { viewMode });
    if (result.ok) applyPayload(s, result.data, result.etag);
    else setError(s, result.data);
  }

  async function loadEarlier(s) {
    const oldest = s.older.length ? s.older[0] : s.payload.messages[0];
    if (!oldest) return;
    const query =
      "?before=" + oldest.seq + "&limit=50&view=" + encodeURIComponent(s.payload.viewMode);
    const result = await api("GET", sessionPath(s.id, "messages") + query);
    if (!result.ok) {
      setError(s, result.data);
      return;
    }
    s.older = result.data.messages.concat(s.older);
    s.olderHasMore = result.data.hasMore;
    renderTranscript(s, { keepScroll: true });
  }

  async function refreshHistory() {
    const result = await api("GET", "sessions?limit=50");
    if (!result.ok) return;
    state.history = result.data.sessions;
    renderHistory();
  }

  async function refreshDiagnostics() {
    const s = activeSession();
    if (!s) return;
    const result = await api("GET", sessionPath(s.id, "diagnostics"));
    if (!result.ok) {
      setError(s, result.data);
      return;
    }
    state.diagnostics = result.data;
    renderDebugger();
  }

  function downloadDiagnostics() {
    if (!state.diagnostics) return;
    const blob = new Blob([JSON.stringify(state.diagnostics, null, 2)], {
      type: "application/json",
    });
    const url = URL.createObjectURL(blob);
    const link = el("a", {
      href: url,
      download: "ahentic-" + state.diagnostics.id + "-diagnostics.json",
    });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  // ------------------------------------------------------------------ rendering

  function renderAll() {
    show(ui.panel, !state.collapsed);
    ui.launcher.setAttribute("aria-expanded", String(!state.collapsed));
    show(ui.launcher, state.collapsed);
    ui.debugToggle.setAttribute("aria-pressed", String(state.debugOpen));
    ui.debugToggle.setAttribute(
      "aria-label",
      state.debugOpen ? "Hide the debugger" : "Show the debugger",
    );
    renderTabs();
    renderSession();
  }

  function statusOf(s) {
    if (!s || !s.payload) return "none";
    return s.stopping ? "idle" : s.payload.status;
  }

  function renderTabs() {
    const shown = state.tabs.map((tab) => {
      const s = state.sessions.get(tab.id);
      return [tab.id, statusOf(s), (s && s.payload && s.payload.title) || tab.title];
    });
    // Polls re-render often; rebuilding unchanged tabs would steal keyboard focus.
    if (!changed(ui.tabs, JSON.stringify([state.active, shown]))) return;
    const tabs = state.tabs.map((tab) => {
      const s = state.sessions.get(tab.id);
      const status = statusOf(s);
      const selected = tab.id === state.active;
      const title = (s && s.payload && s.payload.title) || tab.title || "New Agent";
      return el(
        "div",
        {
          className: "ahentic-tab" + (selected ? " is-active" : ""),
          "data-session": tab.id,
          "data-status": status,
        },
        el(
          "button",
          {
            type: "button",
            role: "tab",
            className: "ahentic-tab-title",
            "aria-selected": String(selected),
            title,
            onclick: () => activate(tab.id),
          },
          el("span", { className: "ahentic-dot", "aria-hidden": "true" }),
          el("span", { className: "ahentic-tab-text", text: title }),
        ),
        el("button", {
          type: "button",
          className: "ahentic-tab-close",
          "aria-label": "Close chat " + title,
          text: "×",
          onclick: () => closeTab(tab.id),
        }),
      );
    });
    fill(ui.tabs, ...tabs);
    const attention = state.tabs.some((tab) => {
      const s = state.sessions.get(tab.id);
      return s && s.payload && s.payload.status === "awaiting_human";
    });
    show(ui.launcherDot, attention);
  }

  function renderHistory() {
    const openIds = new Set(state.tabs.map((tab) => tab.id));
    const options = state.history
      .filter((item) => !openIds.has(item.id))
      .map((item) => el("option", { value: item.id, text: item.title + " (" + item.status + ")" }));
    fill(ui.history, el("option", { value: "", text: "History…" }), ...options);
  }

  function renderSession() {
    const s = activeSession();
    const p = s && s.payload;
    root.dataset.status = statusOf(s);
    ui.viewMode.disabled = !p;
    if (p) ui.viewMode.value = p.viewMode;
    renderError();
    renderBanner(s);
    renderPlan(s);
    renderTranscript(s);
    renderHitl(s);
    renderPending(s);
    renderArtifacts(s);
    renderContext(s);
    renderStatusLine(s);
    renderDebugger();
  }

  function renderError() {
    const s = activeSession();
    const error = s ? s.error : state.error;
    if (!error) {
      show(ui.error, false);
      fill(ui.error);
      return;
    }
    fill(
      ui.error,
      el("span", { text: error.detail || "Something went wrong." }),
      error.code ? el("code", { className: "ahentic-error-code", text: error.code }) : null,
      el("button", {
        type: "button",
        className: "ahentic-link",
        "aria-label": "Dismiss the error",
        text: "×",
        onclick: clearError,
      }),
    );
    show(ui.error, true);
  }

  function bannerButton(label, onclick, primary) {
    return el("button", {
      type: "button",
      className: "ahentic-button" + (primary ? " ahentic-primary" : ""),
      text: label,
      onclick,
    });
  }

  /** What the banner says, or null: stuck run, soft-budget pause, resumable job, error. */
  function bannerState(s) {
    const p = s && s.payload;
    if (!p || s.stopping) return null;
    const resumable = (p.status === "idle" || p.status === "error") && p.jobResumable;
    const quiet = p.status === "running" ? ageMs(p.heartbeatAt || p.modifiedAt) : null;
    if (quiet != null && quiet >= config.stuckMs) {
      return { kind: "stuck", text: "This run may be stuck.", continue: true, stop: true };
    }
    if (resumable && p.lastErrorCode === TOKEN_BUDGET_CODE) {
      const text =
        "This chat is using a lot of tokens (" + formatTokens(p.tokensUsed) + "). Continue?";
      return { kind: "budget", text, continue: true, stop: true };
    }
    if (resumable) {
      const text = "This job can be continued." + (p.lastError ? " " + p.lastError : "");
      return { kind: "resumable", text, continue: true };
    }
    if (p.status === "error" && p.lastError) return { kind: "error", text: p.lastError };
    return null;
  }

  function renderBanner(s) {
    const banner = bannerState(s);
    if (!changed(ui.banner, banner ? s.id + "|" + banner.kind + "|" + banner.text : "")) return;
    ui.banner.dataset.kind = banner ? banner.kind : "";
    fill(
      ui.banner,
      ...(banner
        ? [
            el("span", { className: "ahentic-banner-text", text: banner.text }),
            banner.continue ? bannerButton("Continue", () => continueRun(s), true) : null,
            banner.stop ? bannerButton("Stop", stop) : null,
          ]
        : []),
    );
    show(ui.banner, !!banner);
  }

  const STEP_MARKS = { completed: "✓", in_progress: "▸", pending: "○", cancelled: "✕" };

  function renderPlan(s) {
    const plan = s && s.payload && s.payload.plan;
    if (!changed(ui.plan, JSON.stringify(plan || null))) return;
    if (!plan || !plan.steps || !plan.steps.length) {
      show(ui.plan, false);
      fill(ui.plan);
      return;
    }
    fill(
      ui.plan,
      el("div", { className: "ahentic-card-title", text: plan.title || "Plan" }),
      el(
        "ol",
        { className: "ahentic-plan-steps" },
        plan.steps.map((step) =>
          el(
            "li",
            { className: "ahentic-step is-" + step.status, "data-status": step.status },
            el("span", {
              className: "ahentic-step-mark",
              "aria-hidden": "true",
              text: STEP_MARKS[step.status] || "•",
            }),
            el("span", { text: step.content }),
            el("span", {
              className: "ahentic-visually-hidden",
              text: " (" + String(step.status).replace("_", " ") + ")",
            }),
          ),
        ),
      ),
    );
    show(ui.plan, true);
  }

  function previewJson(value, limit) {
    let text;
    try {
      text = JSON.stringify(value, null, 2);
    } catch (err) {
      text = String(value);
    }
    text = text === undefined ? "" : text;
    return text.length > limit ? text.slice(0, limit) + "\n…" : text;
  }

  function messageNode(message) {
    const role = message.role;
    const meta = message.meta || {};
    if (message.kind === "tool_call") {
      return el(
        "details",
        { className: "ahentic-msg ahentic-tool-call", "data-role-kind": "tool_call" },
        el("summary", { text: "→ " + (meta.tool || "tool") }),
        el("pre", { text: previewJson(meta.input, 4000) }),
      );
    }
    if (message.kind === "tool_response") {
      const failed = meta.ok === false;
      const label =
        "← " +
        (meta.tool || "tool") +
        (failed ? " failed" + (meta.error ? " (" + meta.error + ")" : "") : " ok");
      return el(
        "details",
        {
          className: "ahentic-msg ahentic-tool-result" + (failed ? " is-failed" : ""),
          "data-role-kind": "tool_response",
        },
        el("summary", { text: label }),
        el("pre", { text: message.content }),
      );
    }
    if (role === "event") {
      return el("div", {
        className: "ahentic-msg ahentic-event",
        "data-role-kind": "event",
        text: message.content,
      });
    }
    const from =
      meta.source === "subagent"
        ? "Sub-agent " + (meta.name || "")
        : role === "user"
          ? "You"
          : "Agent";
    return el(
      "div",
      {
        className:
          "ahentic-msg ahentic-" +
          (meta.source === "subagent" ? "subagent" : role) +
          (meta.error ? " is-error" : ""),
        "data-role-kind": role,
      },
      el("div", { className: "ahentic-msg-from", text: from }),
      el("div", { className: "ahentic-msg-text", text: message.content }),
    );
  }

  function localMessageNode(local) {
    return el(
      "div",
      {
        className: "ahentic-msg ahentic-user is-local",
        "data-role-kind": "user",
        "data-local-id": local.localId,
      },
      el("div", { className: "ahentic-msg-from", text: "You" }),
      el("div", { className: "ahentic-msg-text", text: local.content }),
    );
  }

  /** Messages never change once written, so each node is built once and reused. */
  function cachedNode(s, key, build) {
    let node = s.nodes.get(key);
    if (!node) {
      node = build();
      s.nodes.set(key, node);
    }
    return node;
  }

  function renderTranscript(s, options) {
    const box = ui.transcript;
    const p = s && s.payload;
    const messages = p ? s.older.concat(p.messages) : [];
    const locals = s ? s.localMessages : [];
    const moreAvailable = !!s && !!(s.older.length ? s.olderHasMore : p && p.hasMore);
    box.setAttribute("aria-busy", String(isLive(p)));
    const key = [
      s ? s.id : "",
      p ? p.viewMode : "",
      moreAvailable,
      messages.map((m) => m.id).join(","),
      locals.map((m) => m.localId).join(","),
    ].join("|");
    // Rebuild only on change: a rebuild every poll would drop the reader's text selection.
    if (!changed(box, key)) return;
    const switched = box.dataset.session !== (s ? s.id : "");
    box.dataset.session = s ? s.id : "";
    const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 60;
    const previousHeight = box.scrollHeight;
    const nodes = [];
    if (moreAvailable) {
      nodes.push(
        el("button", {
          type: "button",
          className: "ahentic-link ahentic-earlier",
          text: "Load earlier messages",
          onclick: () => loadEarlier(s),
        }),
      );
    }
    for (const message of messages) {
      nodes.push(cachedNode(s, p.viewMode + ":" + message.id, () => messageNode(message)));
    }
    for (const local of locals) {
      nodes.push(cachedNode(s, local.localId, () => localMessageNode(local)));
    }
    fill(box, nodes.length ? nodes : ui.empty);
    if (options && options.keepScroll) box.scrollTop += box.scrollHeight - previousHeight;
    else if (switched || nearBottom || locals.length) box.scrollTop = box.scrollHeight;
  }

  function renderHitl(s) {
    const p = s && s.payload;
    const pendingTool = p && p.pendingTool;
    const waiting = p && !s.stopping && p.status === "awaiting_human" && pendingTool;
    if (!waiting) {
      changed(ui.hitl, "");
      show(ui.hitl, false);
      fill(ui.hitl);
      return;
    }
    const busy = s.approving === pendingTool.callId;
    if (!changed(ui.hitl, s.id + ":" + pendingTool.callId)) {
      // Same call: keep the card (and a reason being typed); only toggle the buttons.
      ui.hitl.querySelectorAll("button").forEach((button) => (button.disabled = busy));
      show(ui.hitl, true);
      return;
    }
    const reason = el("input", {
      type: "text",
      className: "ahentic-input",
      "data-role-hitl": "reason",
      placeholder: "Reason (optional, sent with Deny)",
      "aria-label": "Reason for denying",
      maxlength: "2000",
    });
    const memory = pendingTool.memory;
    const inputPreview = previewJson(pendingTool.input, 2000);
    const buttons = [
      bannerButton("Allow once", () => decide(s, "allow_once"), true),
      pendingTool.nonPreallowable
        ? null
        : bannerButton("Allow for this chat", () => decide(s, "allow_session")),
      pendingTool.nonPreallowable
        ? null
        : bannerButton("Always allow", () => decide(s, "always_allow")),
      bannerButton("Deny", () => decide(s, "deny", reason.value.trim())),
    ];
    buttons.filter(Boolean).forEach((button) => {
      button.setAttribute("aria-label", button.textContent + ": " + pendingTool.name);
      button.disabled = busy;
    });
    fill(
      ui.hitl,
      el("div", { className: "ahentic-card-title", text: "Approval needed" }),
      el("div", {
        className: "ahentic-hitl-summary",
        text: pendingTool.summary || pendingTool.name,
      }),
      el(
        "div",
        { className: "ahentic-hitl-tool" },
        "Tool: ",
        el("code", { text: pendingTool.name }),
      ),
      memory
        ? el("div", {
            className: "ahentic-hitl-memory",
            text:
              "Artifact: " +
              [memory.title || memory.key, memory.kind, formatBytes(memory.bytes), memory.excerpt]
                .filter(Boolean)
                .join(" · "),
          })
        : null,
      el(
        "details",
        // A short input is shown at once; a long one (a draft body) stays folded.
        { className: "ahentic-hitl-input", open: inputPreview.length <= 400 },
        el("summary", { text: "Input" }),
        el("pre", { text: inputPreview }),
      ),
      reason,
      el("div", { className: "ahentic-hitl-buttons" }, buttons.filter(Boolean)),
    );
    show(ui.hitl, true);
  }

  function renderPending(s) {
    const items =
      s && s.payload ? s.payload.pendingMessages.filter((m) => !s.recalled.has(m.id)) : [];
    if (!changed(ui.pending, (s ? s.id : "") + JSON.stringify(items))) return;
    if (!items.length) {
      show(ui.pending, false);
      fill(ui.pending);
      return;
    }
    fill(
      ui.pending,
      el("div", { className: "ahentic-card-title", text: "Queued until the agent is free" }),
      el(
        "ul",
        {},
        items.map((item) =>
          el(
            "li",
            { className: "ahentic-pending-item", "data-pending-id": item.id },
            el("span", {
              className: "ahentic-pending-text",
              text: (item.sourceType === "subagent" ? "[sub-agent] " : "") + item.content,
            }),
            item.sourceType === "user"
              ? el("button", {
                  type: "button",
                  className: "ahentic-link",
                  text: "Recall",
                  "aria-label": "Recall queued message: " + item.content.slice(0, 60),
                  onclick: () => recall(s, item.id),
                })
              : null,
          ),
        ),
      ),
    );
    show(ui.pending, true);
  }

  function renderArtifacts(s) {
    const artifacts = (s && s.payload && s.payload.artifacts) || [];
    if (!changed(ui.artifacts, JSON.stringify(artifacts))) return;
    ui.artifactCount.textContent = String(artifacts.length);
    fill(
      ui.artifacts,
      ...artifacts.map((a) =>
        el(
          "li",
          { className: "ahentic-artifact", "data-status": a.status },
          el("code", { text: a.key }),
          " ",
          el("span", {
            className: "ahentic-artifact-meta",
            text: [a.kind, a.status, formatBytes(a.bytes)].join(" · "),
          }),
          a.title ? el("div", { className: "ahentic-artifact-title", text: a.title }) : null,
        ),
      ),
    );
    show(ui.artifactsBox, artifacts.length > 0);
  }

  function renderContext(s) {
    const p = s && s.payload;
    const usage = (p && p.contextUsage) || {};
    const percent = Math.max(0, Math.min(100, Number(usage.percent) || 0));
    ui.ring.style.setProperty("--ahentic-fill", percent + "%");
    ui.ring.dataset.level = percent >= 85 ? "high" : percent >= 60 ? "mid" : "low";
    ui.ring.setAttribute("aria-label", "Context " + percent + "% full");
    ui.ring.title = p
      ? `Next request: ${formatTokens(usage.usedTokens)} of ${formatTokens(usage.budgetTokens)} tokens`
      : "";
    if (!p) {
      ui.tokens.textContent = "";
      return;
    }
    const parts = [percent + "%", formatTokens(p.tokensUsed) + " tokens"];
    if (p.costUsd != null) parts.push("$" + Number(p.costUsd).toFixed(p.costUsd < 1 ? 4 : 2));
    ui.tokens.textContent = parts.join(" · ");
    ui.tokens.title = `In ${p.tokensIn} (cache read ${p.cacheReadTokens}, write ${p.cacheWriteTokens}), out ${p.tokensOut}`;
  }

  const STATUS_LABELS = {
    running: "Working…",
    awaiting_human: "Waiting for your approval",
    awaiting_browser: "Running a page tool…",
  };

  function renderStatusLine(s) {
    const p = s && s.payload;
    const live = isLive(p) && !s.stopping;
    let label = "";
    if (live) label = (p.progress && p.progress.label) || STATUS_LABELS[p.status];
    else if (s && s.stopping) label = "Stopping…";
    ui.progress.textContent = label;
    show(ui.watching, live && !runner.isMine(s.id));
    show(ui.stop, live);
  }

  function renderDebugger() {
    show(ui.debugger, state.debugOpen);
    if (!state.debugOpen) return;
    const s = activeSession();
    const p = s && s.payload;
    const trace = p ? p.trace.slice(-20) : [];
    if (changed(ui.trace, JSON.stringify(trace.map((t) => t.id)))) {
      fill(
        ui.trace,
        ...trace.map((t) =>
          el(
            "li",
            {},
            el("code", { text: t.type }),
            " ",
            el("span", { text: (t.step != null ? "#" + t.step + " " : "") + (t.summary || "") }),
          ),
        ),
      );
    }
    const diagnostics =
      state.diagnostics && p && state.diagnostics.id === p.id ? state.diagnostics : null;
    ui.diagnosticsDownload.disabled = !diagnostics;
    ui.diagnostics.textContent = diagnostics
      ? previewJson(
          {
            session: diagnostics.session,
            state: diagnostics.state,
            environment: diagnostics.environment,
          },
          20000,
        )
      : p
        ? `Session ${p.id} · version ${p.version} · run ${p.runSeq} · step ${p.stepCount} · ${p.traceCount} trace events`
        : "";
  }

  // ------------------------------------------------------------------ wiring

  function wire() {
    ui.launcher.addEventListener("click", () => {
      state.collapsed = false;
      saveUi();
      renderAll();
      ui.input.focus();
    });
    ui.collapse.addEventListener("click", () => {
      state.collapsed = true;
      saveUi();
      renderAll();
      ui.launcher.focus();
    });
    ui.newSession.addEventListener("click", async () => {
      clearError();
      if (await createSession()) ui.input.focus();
    });
    ui.history.addEventListener("focus", refreshHistory);
    ui.history.addEventListener("change", () => {
      const id = ui.history.value;
      const item = state.history.find((h) => h.id === id);
      if (item) openTab({ id: item.id, title: item.title, autoTitle: true });
      renderHistory();
    });
    ui.viewMode.addEventListener("change", () => changeViewMode(ui.viewMode.value));
    ui.debugToggle.addEventListener("click", () => {
      state.debugOpen = !state.debugOpen;
      saveUi();
      renderAll();
      if (state.debugOpen) refreshDiagnostics();
    });
    ui.diagnosticsRefresh.addEventListener("click", refreshDiagnostics);
    ui.diagnosticsDownload.addEventListener("click", downloadDiagnostics);
    ui.composer.addEventListener("submit", (event) => {
      event.preventDefault();
      send();
    });
    ui.input.addEventListener("keydown", (event) => {
      // Enter sends, Shift+Enter is a newline; never send in the middle of an IME composition.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send();
      }
    });
    ui.stop.addEventListener("click", stop);
    document.addEventListener("visibilitychange", () => {
      const s = activeSession();
      if (s && document.visibilityState === "visible") schedulePoll(s, 0);
    });
    window.addEventListener("pagehide", () => state.tabs.forEach((tab) => runner.release(tab.id)));
  }

  function heartbeat() {
    // Keep (or take over stale) runner claims for every open chat, and keep time-based UI
    // ("may be stuck", the watching note) current between polls.
    for (const tab of state.tabs) runner.claim(tab.id);
    const s = activeSession();
    if (s) {
      renderStatusLine(s);
      if (s.payload && s.payload.status === "running") renderBanner(s);
    }
    if (
      state.debugOpen &&
      s &&
      isLive(s.payload) &&
      Date.now() - state.diagnosticsAt > config.diagnosticsRefreshMs
    ) {
      state.diagnosticsAt = Date.now();
      refreshDiagnostics();
    }
  }

  function start() {
    const saved = storage.read("tabs", { open: [], active: null });
    state.tabs = Array.isArray(saved.open)
      ? saved.open.filter((tab) => tab && typeof tab.id === "string")
      : [];
    state.active = state.tabs.some((tab) => tab.id === saved.active)
      ? saved.active
      : state.tabs.length
        ? state.tabs[0].id
        : null;
    const prefs = storage.read(config.inAdmin ? "ui-admin" : "ui", {});
    // In the admin the panel starts folded away: it would cover the changelists.
    state.collapsed = typeof prefs.collapsed === "boolean" ? prefs.collapsed : config.inAdmin;
    state.debugOpen = !!prefs.debugOpen;
    wire();
    renderAll();
    // Load every open tab once (titles, statuses); live ones keep polling on their own.
    for (const tab of state.tabs) schedulePoll(sessionState(tab.id), 0);
    setInterval(heartbeat, config.runnerHeartbeatMs);
    refreshHistory();
  }

  window.AhenticSidebar = {
    /** Add a browser tool: handler(input) returns (or resolves to) the JSON result. */
    registerBrowserTool(name, handler) {
      browserTools[name] = handler;
    },
  };

  start();
})();

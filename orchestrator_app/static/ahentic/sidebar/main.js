/*
 * django-ahentic chat sidebar: the entry module. Vanilla ES modules served as static files, no
 * build step. The modules, one concern each:
 *   api.js            the API client and the poll loop (ETag + If-None-Match)
 *   transcript.js     messages, decisions, the reply bubble; markdown.js renders model text
 *   cards.js          banner, plan, approval card, queued messages, artifacts, sub-agents
 *   tabs.js           chat tabs (keyboard too) and the history picker
 *   agents.js         the new-chat agent picker, the chat's agent, "move to the latest version"
 *   attachments.js    files attached to a message (button, paste, drop) and their thumbnails
 *   memory.js         "What I remember": the chat's agent's memory of the user, to delete
 *   settings.js       Settings: the user's opt-outs of the agent's mails
 *   tokens.js         "MCP access": the user's tokens for the site's MCP endpoint
 *   connections.js    Connections: the user's accounts on the agents' MCP servers
 *   browser_tools.js  page tools run in this page and the one-runner-window claim
 *   dom.js, storage.js small helpers
 *
 * The server drives the agent; this code only shows a session and answers it: it polls the
 * session payload, posts messages, approvals, stops and continues, and runs the browser tools in
 * the page. User text is always textContent; model text goes through the Markdown renderer, which
 * sanitizes its output. Nothing from the API is inserted as HTML as it came.
 *
 * Host pages may add browser tools of their own:
 *   window.AhenticSidebar.registerBrowserTool("editor_insert", async (input) => ({ok: true}));
 */
import { createAgents } from "./agents.js";
import { createClient, createPoller, isLive, sessionPath } from "./api.js";
import { createAttachments } from "./attachments.js";
import { browserTools, createBrowserRunner, createRunnerClaim } from "./browser_tools.js";
import {
  closeArtifact,
  renderArtifacts,
  renderBanner,
  renderChildren,
  renderHitl,
  renderPending,
  renderPlan,
  waitsForWorker,
} from "./cards.js";
import { camel, changed, el, fill, formatTokens, previewJson, shortened, show } from "./dom.js";
import { createStorage } from "./storage.js";
import { renderHistory, renderTabs, statusOf, wireTabs } from "./tabs.js";
import { createMemoryPanel } from "./memory.js";
import { createSettingsPanel } from "./settings.js";
import { createMcpTokens } from "./tokens.js";
import { createConnections } from "./connections.js";
import { keepPinned, renderTranscript } from "./transcript.js";

const STATUS_LABELS = {
  running: "Working…",
  awaiting_human: "Waiting for your approval",
  awaiting_browser: "Running a page tool…",
};
const STATUS_LINE_LIMIT = 90;
// Below this width the panel would cover the whole page: it starts folded, and never docks.
const NARROW_PX = 720;

function boot(root) {
  const config = {
    api: root.dataset.api || "/ahentic/v1/",
    csrf: root.dataset.csrf || "",
    pollMs: Number(root.dataset.pollMs) || 650,
    liveMs: 400, // the reply being streamed, polled for the shown chat while it runs
    idlePollMs: 5000, // the active tab's idle session: cheap 304s, picks up other windows' work
    fastAfterActionMs: 4000, // keep polling fast this long after a send, even if a poll says idle
    browserTimeoutMs: (Number(root.dataset.browserTimeoutS) || 45) * 1000,
    stallNudgeMs: 8000, // running without a heartbeat this long: POST continue (runner only)
    unclaimedMs: 8000, // running, no worker claimed the step this long: say a worker is missing
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
    docked: false,
    debugOpen: false,
    diagnostics: null,
    diagnosticsAt: 0,
    history: [],
    error: null, // an error with no chat to show it in
  };

  const storage = createStorage(config.storagePrefix);
  const runner = createRunnerClaim(storage, config, windowId);
  const client = createClient(config);
  const { api } = client;

  // The object the other modules work with: shared state plus the actions they may call.
  const app = { root, config, ui, state, client };
  const memory = createMemoryPanel(app); // "What I remember" (memory.js)
  createSettingsPanel(app); // the mail opt-outs, behind a header button (settings.js)
  createMcpTokens(app); // "MCP access" (tokens.js)
  createConnections(app); // Connections to MCP servers (connections.js)
  const attachments = createAttachments(app, {
    session: async () => {
      const existing = activeSession();
      return existing && !isReadOnly(existing) ? existing : await createSession();
    },
    error: (s, data) => setError(s, data),
    render: () => renderSession(),
  });

  // ---------------------------------------------------------------- persistence

  function saveTabs() {
    storage.write("tabs", { open: state.tabs, active: state.active });
  }

  function saveUi() {
    storage.write(config.inAdmin ? "ui-admin" : "ui", {
      collapsed: state.collapsed,
      docked: state.docked,
      debugOpen: state.debugOpen,
    });
  }

  // ---------------------------------------------------------------- per-session state

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
        previewKey: null, // the artifact shown in the preview
        progressExpanded: { value: false }, // the status line's "Show more"
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

  const isOpen = (s) => !!tabOf(s.id);

  /** A sub-agent's chat is shown read-only: its messages come from the parent agent. */
  function isReadOnly(s) {
    return !!(s && s.payload && s.payload.parentId);
  }

  /** Apply a session payload from a poll or a mutating call. Older versions are ignored. */
  function applyPayload(s, payload, etag) {
    if (!payload || !payload.id) return;
    // A slow response can arrive after a newer one: the payload version only grows.
    if (s.payload && payload.version < s.payload.version) return;
    if (s.payload && s.payload.viewMode !== payload.viewMode) s.older = [];
    s.payload = payload;
    if (etag) s.etag = etag;
    // A new version may hold the streamed reply as a message now: the live text waits for
    // the next live poll (which finds it cleared, or still growing).
    s.live = null;
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
    renderTabs(app);
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

  // ---------------------------------------------------------------- polling

  const poller = createPoller(config, client, {
    isOpen,
    isActive: (s) => s.id === state.active,
    onPayload(s, payload, etag) {
      applyPayload(s, payload, etag);
      if (s.error && s.error.fromPoll) setError(s, null);
    },
    onNotModified(s) {
      // Nothing changed, but time-based duties (stall nudge, "may be stuck") still advance.
      if (s.payload) actAsRunner(s);
      if (s.id === state.active) renderBanner(app, s);
    },
    onGone(s) {
      closeTab(s.id);
      setError(null, { code: "ahentic_session_not_found", detail: "That chat no longer exists." });
    },
    onError(s, data) {
      setError(s, Object.assign({ fromPoll: true }, data));
    },
  });
  const pollSoon = poller.soon;

  // ---------------------------------------------------------------- live text

  /** The reply the model is streaming (GET sessions/{id}/live), for the shown chat only and
   * only while it runs: an idle chat costs no extra request. The text is shown as it grows and
   * gives way to the reply's message when the session's next version arrives. */
  async function pollLive() {
    const s = activeSession();
    const p = s && s.payload;
    if (!p || p.status !== "running" || s.livePolling) return;
    s.livePolling = true;
    const result = await api("GET", sessionPath(s.id, "live"));
    s.livePolling = false;
    if (!result.ok || !s.payload || s.payload.status !== "running") return;
    const text = result.data.run === s.payload.runSeq ? result.data.text : "";
    if (text === ((s.live && s.live.text) || "")) return;
    s.live = text ? { text } : null;
    if (s.id === state.active) renderTranscript(app, s);
  }

  // ---------------------------------------------------------------- runner duties

  const browserRunner = createBrowserRunner({
    root,
    config,
    client,
    isOpen,
    applyPayload,
    pollSoon,
    setError: (s, error) => setError(s, error),
  });

  function actAsRunner(s) {
    const p = s.payload;
    if (!p || !tabOf(s.id) || !runner.claim(s.id)) return;
    if (p.status === "awaiting_browser" && p.pendingTool && p.pendingTool.runtime === "browser") {
      browserRunner.run(s, p.pendingTool);
      const paused = client.ageMs(p.browserPausedAt || (p.progress && p.progress.updatedAt));
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
      const quiet = client.ageMs(p.heartbeatAt || p.modifiedAt);
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

  // ---------------------------------------------------------------- actions

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

  /** A new chat with the agent `slug` (absent: the site's default agent). */
  async function createSession(slug) {
    const result = await api("POST", "sessions", slug ? { agent: slug } : {});
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
    renderTabs(app);
    renderSession();
    poller.schedule(s, 0);
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
      renderTabs(app);
      renderSession();
    }
  }

  async function postMessage(s, content, attached) {
    runner.claim(s.id, true); // the user is on this page now: its window runs the page tools
    const local = { localId: "local_u_" + Date.now(), content, afterSeq: lastSeq(s) };
    // The composer's uploads (true), or the attachments of a recalled queued message.
    const files = attached === true ? attachments.uploaded(s) : attached || [];
    const ids = files.map((item) => item.id);
    if (ids.length) local.attachments = files;
    s.localMessages.push(local);
    renderSession();
    pollSoon(s); // poll right after a send, even if a raced poll says idle
    const body = { content, pageContext: pageContext() };
    if (ids.length) body.attachments = ids;
    const result = await api("POST", sessionPath(s.id, "messages"), body);
    if (result.ok && attached === true) attachments.sent(s);
    if (!result.ok) {
      s.localMessages = s.localMessages.filter((m) => m !== local);
      setError(s, result.data);
      renderSession();
      return false;
    }
    applyPayload(s, result.data, result.etag);
    pollSoon(s);
    return true;
  }

  async function send() {
    const content = ui.input.value.trim();
    const existing = activeSession();
    if (existing && attachments.uploading(existing)) {
      setError(existing, { code: "ahentic_uploading", detail: "Wait for the files to upload." });
      return;
    }
    if (!content && !(existing && attachments.ids(existing).length)) return;
    clearError();
    const s = existing && !isReadOnly(existing) ? existing : await createSession();
    if (!s) return;
    ui.input.value = "";
    if (!(await postMessage(s, content, true)) && !ui.input.value) {
      ui.input.value = content; // give the text back to fix and resend
    }
  }

  /** A message left queued after Stop: take it out of the queue and send it as a new turn. */
  async function sendNow(s, item) {
    clearError();
    s.recalled.add(item.id);
    renderPending(app, s);
    const result = await api("DELETE", sessionPath(s.id, "pending-messages/" + item.id));
    if (!result.ok) {
      s.recalled.delete(item.id);
      setError(s, result.data); // 404: it was already sent to the agent
      pollSoon(s);
      return;
    }
    await postMessage(s, item.content.trim(), item.attachments || []);
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
    renderHitl(app, s);
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
    renderPending(app, s);
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
    renderTranscript(app, s, { keepScroll: true });
  }

  function openChild(child) {
    openTab({ id: child.id, title: child.title, autoTitle: false });
  }

  async function refreshHistory() {
    const result = await api("GET", "sessions?limit=50");
    if (!result.ok) return;
    state.history = result.data.sessions;
    renderHistory(app);
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

  const agentUi = createAgents(app, {
    create: async (slug) => {
      clearError();
      if (await createSession(slug)) ui.input.focus();
    },
    applyPayload: (s, payload, etag) => applyPayload(s, payload, etag),
    setError: (s, data) => setError(s, data),
    isLive,
    listed: () => renderSession(),
  });

  Object.assign(app, {
    activate,
    closeTab,
    applyPayload,
    decide,
    recall,
    sendNow,
    stop,
    continueRun,
    loadEarlier,
    openChild,
  });

  // ---------------------------------------------------------------- rendering

  function setCollapsed(collapsed) {
    state.collapsed = collapsed;
    saveUi();
    renderAll();
  }

  function renderLayout() {
    show(ui.panel, !state.collapsed);
    ui.launcher.setAttribute("aria-expanded", String(!state.collapsed));
    show(ui.launcher, state.collapsed);
    // Docked: the page gives the panel its width (html.ahentic-docked in sidebar.css).
    document.documentElement.classList.toggle("ahentic-docked", state.docked && !state.collapsed);
    ui.dock.setAttribute("aria-pressed", String(state.docked));
    ui.dock.setAttribute(
      "aria-label",
      state.docked ? "Float the panel over the page" : "Dock the panel beside the page",
    );
    ui.debugToggle.setAttribute("aria-pressed", String(state.debugOpen));
    ui.debugToggle.setAttribute(
      "aria-label",
      state.debugOpen ? "Hide the debugger" : "Show the debugger",
    );
  }

  function renderAll() {
    renderLayout();
    renderTabs(app);
    renderSession();
  }

  function renderSession() {
    const s = activeSession();
    const p = s && s.payload;
    root.dataset.status = statusOf(app, s);
    ui.viewMode.disabled = !p;
    if (p) ui.viewMode.value = p.viewMode;
    const readOnly = isReadOnly(s);
    show(ui.composer, !readOnly);
    show(ui.readOnly, readOnly);
    renderError();
    renderBanner(app, s);
    renderPlan(app, s);
    renderTranscript(app, s);
    renderHitl(app, s);
    renderPending(app, s);
    renderArtifacts(app, s);
    renderChildren(app, s);
    agentUi.render(s);
    memory.render(s);
    renderContext(s);
    renderStatusLine(s);
    renderDebugger();
    attachments.render();
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

  function renderContext(s) {
    const p = s && s.payload;
    const usage = (p && p.contextUsage) || {};
    const percent = Math.max(0, Math.min(100, Math.round(Number(usage.percent) || 0)));
    ui.ring.style.setProperty("--ahentic-fill", percent + "%");
    ui.ring.dataset.level = percent >= 85 ? "high" : percent >= 60 ? "mid" : "low";
    ui.ring.setAttribute("aria-label", "Context " + percent + "% full");
    ui.ring.title = p
      ? `Next request: ${formatTokens(usage.usedTokens)} of ${formatTokens(usage.budgetTokens)} tokens of context`
      : "";
    if (!p) {
      ui.tokens.textContent = "";
      return;
    }
    // The context fill (what the next request sends) and the chat's total use are different
    // numbers: say which is which.
    // Tokens are counted when a model call ends: before the first one there is no count to
    // show (not "0 tokens").
    const parts = ["Context " + percent + "%"];
    if (p.tokensUsed > 0) parts.push(formatTokens(p.tokensUsed) + " tokens this chat");
    if (p.costUsd != null) parts.push("$" + Number(p.costUsd).toFixed(p.costUsd < 1 ? 4 : 2));
    ui.tokens.textContent = parts.join(" · ");
    ui.tokens.title = `In ${p.tokensIn} (cache read ${p.cacheReadTokens}, write ${p.cacheWriteTokens}), out ${p.tokensOut}`;
  }

  function renderStatusLine(s) {
    const p = s && s.payload;
    const live = isLive(p) && !s.stopping;
    let label = "";
    if (live && waitsForWorker(app, s)) label = "Waiting for a worker…";
    else if (live) label = (p.progress && p.progress.label) || STATUS_LABELS[p.status];
    else if (s && s.stopping) label = "Stopping…";
    if (changed(ui.progress, (s ? s.id : "") + "|" + label)) {
      if (s) s.progressExpanded.value = false;
      fill(
        ui.progress,
        label
          ? shortened(label, STATUS_LINE_LIMIT, { expanded: s ? s.progressExpanded : undefined })
          : null,
      );
    }
    show(ui.watching, live && !runner.isMine(s.id));
    show(ui.stop, live && !isReadOnly(s));
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

  // ---------------------------------------------------------------- wiring

  function wire() {
    ui.launcher.addEventListener("click", () => {
      setCollapsed(false);
      ui.input.focus();
    });
    ui.collapse.addEventListener("click", () => {
      setCollapsed(true);
      ui.launcher.focus();
    });
    ui.panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
      event.preventDefault();
      // Escape in the message box leaves the box (its text stays) and never closes the panel:
      // focus goes to the conversation, from where the next Escape does.
      if (event.target === ui.input) {
        ui.transcript.focus();
        return;
      }
      // Escape closes the innermost thing first: an open artifact preview, then the panel.
      if (closeArtifact(app, activeSession())) return;
      setCollapsed(true);
      ui.launcher.focus();
    });
    ui.dock.addEventListener("click", () => {
      state.docked = !state.docked;
      saveUi();
      renderLayout();
    });
    ui.newSession.addEventListener("click", () => agentUi.newChat());
    agentUi.wire();
    ui.history.addEventListener("focus", () => {
      refreshHistory();
      agentUi.refresh();
    });
    ui.history.addEventListener("change", () => {
      const id = ui.history.value;
      const item = state.history.find((h) => h.id === id);
      if (item) openTab({ id: item.id, title: item.title, autoTitle: true });
      renderHistory(app);
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
    attachments.wire();
    wireTabs(app);
    keepPinned(ui.transcript);
    document.addEventListener("visibilitychange", () => {
      const s = activeSession();
      if (s && document.visibilityState === "visible") poller.schedule(s, 0);
    });
    window.addEventListener("pagehide", () => state.tabs.forEach((tab) => runner.release(tab.id)));
    window.addEventListener("storage", onStorage);
  }

  /** Another window of this browser saved its tabs: chats it opened appear here too (this
   * window's active chat stays; closing a chat stays a per-window choice). */
  function onStorage(event) {
    if (event.key !== config.storagePrefix + "tabs" || !event.newValue) return;
    let saved;
    try {
      saved = JSON.parse(event.newValue);
    } catch (err) {
      return;
    }
    const open = saved && Array.isArray(saved.open) ? saved.open : [];
    const added = open.filter((tab) => tab && typeof tab.id === "string" && !tabOf(tab.id));
    if (!added.length) return;
    for (const tab of added) {
      state.tabs.push({
        id: tab.id,
        title: tab.title || "New Agent",
        autoTitle: tab.autoTitle !== false,
      });
      poller.schedule(sessionState(tab.id), 0); // its title and status
    }
    if (!state.active) state.active = added[0].id;
    renderTabs(app);
    renderSession();
    renderHistory(app);
  }

  function heartbeat() {
    // Keep (or take over stale) runner claims for every open chat, and keep time-based UI
    // ("may be stuck", the watching note) current between polls.
    for (const tab of state.tabs) runner.claim(tab.id);
    const s = activeSession();
    if (s) {
      renderStatusLine(s);
      if (s.payload && s.payload.status === "running") renderBanner(app, s);
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
    const narrow = window.innerWidth < NARROW_PX;
    // In the admin the panel starts folded away (it would cover the changelists), and on a
    // narrow screen it always does: it would cover the whole page.
    state.collapsed =
      narrow || (typeof prefs.collapsed === "boolean" ? prefs.collapsed : config.inAdmin);
    state.docked = !!prefs.docked;
    state.debugOpen = !!prefs.debugOpen;
    wire();
    renderAll();
    // A link from a mail (?ahentic_session=<id>) opens that chat, once: the parameter is dropped.
    const link = new URL(window.location.href);
    const linked = link.searchParams.get("ahentic_session");
    if (linked) {
      link.searchParams.delete("ahentic_session");
      window.history.replaceState(window.history.state, "", link);
      setCollapsed(false);
      openTab({ id: linked });
    }
    // Load every open tab once (titles, statuses); live ones keep polling on their own.
    for (const tab of state.tabs) poller.schedule(sessionState(tab.id), 0);
    setInterval(heartbeat, config.runnerHeartbeatMs);
    setInterval(pollLive, config.liveMs);
    refreshHistory();
    agentUi.refresh();
  }

  start();
}

const root = document.getElementById("ahentic-sidebar");
// The tag rendered twice: the first one wins.
if (root && root.dataset.ready !== "1") {
  root.dataset.ready = "1";
  boot(root);
}

window.AhenticSidebar = {
  /** Add a browser tool: handler(input) returns (or resolves to) the JSON result. */
  registerBrowserTool(name, handler) {
    browserTools[name] = handler;
  },
};

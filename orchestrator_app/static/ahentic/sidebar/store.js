/*
 * The sidebar's state: its config (from the root element's data attributes), the shared `state`,
 * each chat's client state, the tabs and layout remembered in localStorage, and applying a
 * session payload (newer versions only) with its reconcile of the optimistic bubbles.
 */
import { renderTabs } from "./tabs.js";

// Below this width the panel would cover the whole page: it starts folded, and never docks.
const NARROW_PX = 720;

/** The settings the template put on the root element, and the timings of the sidebar. */
export function readConfig(root) {
  return {
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
    staff: root.dataset.staff === "1", // Verbose and Debug are offered to staff only
    storagePrefix: "ahentic:v1:" + (root.dataset.user || "anonymous") + ":",
  };
}

export function createState() {
  return {
    tabs: [], // [{id, title, autoTitle}] open tabs, persisted
    active: null, // id of the active tab
    sessions: new Map(), // id -> per-session client state (see sessionState)
    collapsed: false,
    docked: false,
    debugOpen: false,
    diagnostics: null,
    diagnosticsAt: 0,
    error: null, // an error with no chat to show it in
  };
}

/** Uses app.storage; calls app.renderSession and app.actAsRunner when a payload arrives. */
export function createStore(app) {
  const { config, state, storage } = app;
  const uiKey = config.inAdmin ? "ui-admin" : "ui";

  function saveTabs() {
    storage.write("tabs", { open: state.tabs, active: state.active });
  }

  function saveUi() {
    storage.write(uiKey, {
      collapsed: state.collapsed,
      docked: state.docked,
      debugOpen: state.debugOpen,
    });
  }

  /** The saved tabs and layout; the panel starts folded in the admin and on a narrow screen. */
  function restore() {
    const saved = storage.read("tabs", { open: [], active: null });
    state.tabs = Array.isArray(saved.open)
      ? saved.open.filter((tab) => tab && typeof tab.id === "string")
      : [];
    state.active = state.tabs.some((tab) => tab.id === saved.active)
      ? saved.active
      : state.tabs.length
        ? state.tabs[0].id
        : null;
    const prefs = storage.read(uiKey, {});
    const narrow = window.innerWidth < NARROW_PX;
    // In the admin the panel starts folded away (it would cover the changelists), and on a
    // narrow screen it always does: it would cover the whole page.
    state.collapsed =
      narrow || (typeof prefs.collapsed === "boolean" ? prefs.collapsed : config.inAdmin);
    state.docked = !!prefs.docked;
    state.debugOpen = !!prefs.debugOpen;
  }

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
    if (s.id === state.active) app.renderSession();
    app.actAsRunner(s);
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

  return {
    saveTabs,
    saveUi,
    restore,
    sessionState,
    activeSession,
    tabOf,
    isOpen,
    isReadOnly,
    applyPayload,
    lastSeq,
  };
}

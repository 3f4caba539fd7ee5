/*
 * django-ahentic chat sidebar: the entry module. Vanilla ES modules served as static files, no
 * build step. boot() below creates the modules and wires them; the modules, one concern each:
 *   store.js          config, the shared state, each chat's state, saved tabs and layout,
 *                     applying a session payload (newer versions only)
 *   polling.js        the poll loop's hooks and the live text of a streaming reply
 *   runner.js         the runner's duties (page tools, stall nudges) and the heartbeat
 *   layout.js         fold/unfold (the launcher), dock, Escape; admin_room.js places the
 *                     panel in the Django admin (clear of its header and filters, docked
 *                     only where the admin's content keeps 700 px)
 *   header.js         the view-mode switch and the "More" menu of secondary buttons
 *   chats.js          a new chat, opening, switching and closing chats, tabs opened by
 *                     another window, the ?ahentic_session link
 *   history_panel.js  History: every chat by day, search, rename, delete with Undo
 *   lightbox.js       a transcript image opened larger in a dialog
 *   shortcuts.js      "/" or Alt+Shift+A: open the sidebar at the message box; Alt+Shift+N:
 *                     a new chat; "?": the list of shortcuts
 *   composer.js       send, queued messages (send now, recall), Stop, Continue, approvals,
 *                     changing the view mode, "Load earlier messages"
 *   session_view.js   renderSession (everything about the shown chat), the error line, the
 *                     context ring and token count, the status line
 *   debugger.js       the trace list and the diagnostics (refresh, download)
 *   api.js            the API client and the poll loop (ETag + If-None-Match)
 *   transcript.js     messages, decisions, the reply bubble; markdown.js renders model text
 *   reply_actions.js  Copy, Retry and Edit on the replies, earlier attempts folded, Up edits
 *   cards.js          banner, plan, approval card, queued messages, artifacts, sub-agents
 *   tabs.js           chat tabs (keyboard too)
 *   agents.js         the new-chat agent picker, the chat's agent, "move to the latest version"
 *   attachments.js    the composer's attach button, paste, drop and thumbnails; uploads.js
 *                     holds each chat's uploads and the upload calls
 *   memory.js         "What I remember": the chat's agent's memory of the user, to delete
 *   settings.js       Settings: the user's opt-outs of the agent's mails
 *   tokens.js         "MCP access": the user's tokens for the site's MCP endpoint
 *   connections.js    Connections: the user's accounts on the agents' MCP servers
 *   thinking.js       the model's summarized thinking, folded
 *   announce.js       what a screen reader hears: finished replies and approval requests, once
 *   browser_tools.js  page tools run in this page and the one-runner-window claim
 *   i18n.js           gettext/ngettext over Django's JavaScript catalog
 *   dom.js, storage.js small helpers
 *
 * How they talk: one object, `app` ({root, config, ui, state, storage, client, runner} plus what
 * the modules provide). Each module exports createX(app), which returns its functions; boot
 * assigns them onto `app` in one place (below), and modules call each other only through `app`,
 * at call time, so no module imports another's factory and the creation order does not matter.
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
import { createAnnouncer } from "./announce.js";
import { createClient, isLive } from "./api.js";
import { createAttachments } from "./attachments.js";
import { browserTools, createRunnerClaim } from "./browser_tools.js";
import { createChats } from "./chats.js";
import { createComposer } from "./composer.js";
import { createConnections } from "./connections.js";
import { createDebugger } from "./debugger.js";
import { camel } from "./dom.js";
import { createHeader } from "./header.js";
import { createHistoryPanel } from "./history_panel.js";
import { createLayout } from "./layout.js";
import { createLightbox } from "./lightbox.js";
import { createMemoryPanel } from "./memory.js";
import { createPolling } from "./polling.js";
import { createReplyActions } from "./reply_actions.js";
import { createRunnerDuties } from "./runner.js";
import { createSessionView } from "./session_view.js";
import { createSettingsPanel } from "./settings.js";
import { wireShortcuts } from "./shortcuts.js";
import { createStorage } from "./storage.js";
import { createState, createStore, readConfig } from "./store.js";
import { wireTabs } from "./tabs.js";
import { createMcpTokens } from "./tokens.js";
import { keepPinned } from "./transcript.js";

/** Put `names` of `module` on `app`: each once, so a reader of boot sees who provides what. */
function provide(app, module, names) {
  for (const name of names) {
    if (typeof module[name] !== "function" || name in app) throw new Error("provide: " + name);
    app[name] = module[name];
  }
  return module;
}

function boot(root) {
  const config = readConfig(root);
  const windowId = Math.random().toString(36).slice(2) + Date.now().toString(36);
  const ui = {};
  root.querySelectorAll("[data-role]").forEach((node) => {
    ui[camel(node.dataset.role)] = node;
  });
  const storage = createStorage(config.storagePrefix);
  const runner = createRunnerClaim(storage, config, windowId);
  const client = createClient(config);
  const app = { root, config, ui, state: createState(), storage, client, runner };

  // Who provides what on `app` (modules call these through `app`, at call time).
  const store = provide(app, createStore(app), [
    "sessionState", "activeSession", "tabOf", "isOpen", "isReadOnly", "lastSeq",
    "applyPayload", "saveTabs", "saveUi",
  ]);
  provide(app, createSessionView(app), [
    "renderSession", "renderStatusLine", "setError", "clearError",
  ]);
  const polling = provide(app, createPolling(app), ["pollSoon"]);
  app.poller = polling; // poller.schedule(s, ms)
  const duties = provide(app, createRunnerDuties(app), ["actAsRunner"]);
  const layout = provide(app, createLayout(app), ["setCollapsed", "renderAll"]);
  const chats = provide(app, createChats(app), [
    "createSession", "activate", "closeTab", "openChild",
  ]);
  const composer = provide(app, createComposer(app), [
    "decide", "recall", "sendNow", "stop", "continueRun", "loadEarlier", "changeViewMode",
  ]);
  const header = provide(app, createHeader(app), [
    "renderViewMode", "closeMenu", "closeOpenPanel",
  ]);
  const replyActions = provide(app, createReplyActions(app), ["sendEdit", "renderEditing"]);
  const debug = provide(app, createDebugger(app), [
    "renderDebugger", "refreshDiagnosticsWhileLive",
  ]);
  // The panels: renderSession draws memory, attachments and agents; the others keep to
  // their header buttons.
  app.memory = createMemoryPanel(app); // "What I remember"
  app.announcer = createAnnouncer(ui.announcer); // the polite live region
  createSettingsPanel(app); // the mail opt-outs
  createMcpTokens(app); // "MCP access"
  createConnections(app); // Connections to MCP servers
  app.historyPanel = createHistoryPanel(app, {
    open: (item) => chats.openTab({ id: item.id, title: item.title, autoTitle: true }),
    close: app.closeTab,
    openIds: () => app.state.tabs.map((tab) => tab.id),
    renamed: (id, payload, etag) => {
      if (app.tabOf(id)) app.applyPayload(app.sessionState(id), payload, etag);
    },
    opened: () => app.agents.refresh(), // a newer agent version shows up without a reload
  });
  createLightbox(app); // transcript images, larger on click
  app.attachments = createAttachments(app, {
    session: async () => {
      const existing = app.activeSession();
      return existing && !app.isReadOnly(existing) ? existing : await app.createSession();
    },
    error: app.setError,
    render: app.renderSession,
  });
  app.agents = createAgents(app, {
    create: async (slug) => {
      app.clearError();
      if (await app.createSession(slug)) ui.input.focus();
    },
    applyPayload: app.applyPayload,
    setError: app.setError,
    isLive,
    listed: app.renderSession,
  });

  // Before header.wire: its "Keyboard shortcuts" button goes into the More menu too.
  wireShortcuts(app, () => {
    app.setCollapsed(false);
    ui.input.focus();
  });
  store.restore();
  layout.wire();
  header.wire(); // after the panels added their buttons: it moves them into "More"
  chats.wire();
  debug.wire();
  composer.wire();
  replyActions.wire();
  wireTabs(app);
  keepPinned(ui.transcript);
  layout.renderAll();
  chats.openLinkedAndLoad();
  setInterval(duties.heartbeat, config.runnerHeartbeatMs);
  setInterval(polling.pollLive, config.liveMs);
  app.agents.refresh();
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

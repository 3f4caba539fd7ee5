/*
 * Which chats are open: a new chat, opening one (a tab, the history panel, a sub-agent, a mail's
 * ?ahentic_session link), switching and closing tabs, and the tabs another window of this
 * browser opened.
 */
import { gettext } from "./i18n.js";
import { renderTabs } from "./tabs.js";

/** Uses the store's functions on app, app.poller, app.runner, app.agents, app.setError. */
export function createChats(app) {
  const { client, config, state, ui } = app;

  /** A new chat with the agent `slug` (absent: the site's default agent). */
  async function createSession(slug) {
    const result = await client.api("POST", "sessions", slug ? { agent: slug } : {});
    if (!result.ok) {
      app.setError(null, result.data);
      return null;
    }
    const s = app.sessionState(result.data.id);
    openTab({ id: result.data.id, title: result.data.title, autoTitle: result.data.autoTitle });
    app.applyPayload(s, result.data, result.etag);
    return s;
  }

  function addTab(tab) {
    state.tabs.push({
      id: tab.id,
      title: tab.title || gettext("New Agent"),
      autoTitle: tab.autoTitle !== false,
    });
  }

  function openTab(tab) {
    if (!app.tabOf(tab.id)) addTab(tab);
    activate(tab.id);
  }

  function activate(id) {
    state.active = id;
    app.saveTabs();
    const s = app.sessionState(id);
    renderTabs(app);
    app.renderSession();
    app.poller.schedule(s, 0);
  }

  function closeTab(id) {
    const s = state.sessions.get(id);
    if (s) clearTimeout(s.timer);
    state.sessions.delete(id);
    app.runner.release(id);
    const index = state.tabs.findIndex((tab) => tab.id === id);
    if (index === -1) return;
    state.tabs.splice(index, 1);
    if (state.active === id) {
      const next = state.tabs[Math.min(index, state.tabs.length - 1)];
      state.active = next ? next.id : null;
    }
    app.saveTabs();
    if (state.active) activate(state.active);
    else {
      renderTabs(app);
      app.renderSession();
    }
  }

  function openChild(child) {
    openTab({ id: child.id, title: child.title, autoTitle: false });
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
    const added = open.filter((tab) => tab && typeof tab.id === "string" && !app.tabOf(tab.id));
    if (!added.length) return;
    for (const tab of added) {
      addTab(tab);
      app.poller.schedule(app.sessionState(tab.id), 0); // its title and status
    }
    if (!state.active) state.active = added[0].id;
    renderTabs(app);
    app.renderSession();
  }

  /** A link from a mail (?ahentic_session=<id>) opens that chat, once: the parameter is
   * dropped. Then every open tab loads once (titles, statuses); live ones keep polling. */
  function openLinkedAndLoad() {
    const link = new URL(window.location.href);
    const linked = link.searchParams.get("ahentic_session");
    if (linked) {
      link.searchParams.delete("ahentic_session");
      window.history.replaceState(window.history.state, "", link);
      app.setCollapsed(false);
      openTab({ id: linked });
    }
    for (const tab of state.tabs) app.poller.schedule(app.sessionState(tab.id), 0);
  }

  function wire() {
    ui.newSession.addEventListener("click", () => app.agents.newChat());
    app.agents.wire();
    document.addEventListener("visibilitychange", () => {
      const s = app.activeSession();
      if (s && document.visibilityState === "visible") app.poller.schedule(s, 0);
    });
    window.addEventListener("pagehide", () =>
      state.tabs.forEach((tab) => app.runner.release(tab.id)),
    );
    window.addEventListener("storage", onStorage);
  }

  return {
    createSession,
    openTab,
    activate,
    closeTab,
    openChild,
    openLinkedAndLoad,
    wire,
  };
}

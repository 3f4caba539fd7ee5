/*
 * Agents: the new-chat button's picker (the agents the user may use that show on this page:
 * "admin" inside the Django admin, "site" elsewhere; with one agent, or none, no picker), the
 * agent a chat is with in the header, and "move this chat to the latest version" with what
 * that changes.
 *
 * The picker is a WAI-ARIA menu: the button has aria-haspopup and aria-expanded, the arrow
 * keys, Home and End move between its items, Enter or a click picks one, Escape and Tab close
 * it (Escape gives the focus back to the button).
 */
import { sessionPath } from "./api.js";
import { changed, el, fill, previewJson, show } from "./dom.js";
import { gettext } from "./i18n.js";

const COLOUR = /^#[0-9a-fA-F]{6}$/;
const VALUE_LIMIT = 160;

export function dot(colour) {
  const node = el("span", { className: "ahentic-agent-dot", "aria-hidden": "true" });
  if (COLOUR.test(colour || "")) node.style.setProperty("--ahentic-agent-colour", colour);
  return node;
}

function valueText(value) {
  if (value === null || value === undefined) return gettext("(site default: none)");
  const text = typeof value === "string" ? value : previewJson(value, VALUE_LIMIT);
  return text.length > VALUE_LIMIT ? text.slice(0, VALUE_LIMIT) + "…" : text;
}

/** The changes between two versions, one item each: the setting, before -> after. */
export function changeList(changes) {
  if (!changes.length) return el("p", { className: "ahentic-muted", text: gettext("No setting changes.") });
  return el(
    "ul",
    { className: "ahentic-agent-changes" },
    ...changes.map((change) =>
      el(
        "li",
        {},
        el("code", { text: change.key }),
        ": ",
        el("del", { text: valueText(change.before) }),
        " → ",
        el("ins", { text: valueText(change.after) }),
      ),
    ),
  );
}

/**
 * `actions`: create(slug) starts a chat with that agent (slug null: the site's default),
 * applyPayload(s, payload, etag), setError(s, data), isLive(payload), listed() after the
 * list was read.
 */
export function createAgents(app, actions) {
  const { config, ui, client } = app;
  const place = config.inAdmin ? "admin" : "site";
  const agents = { list: null, loading: null, menuOpen: false };

  /** The agents the user may use (all places: their latest versions serve every chat). */
  function refresh() {
    if (agents.loading) return agents.loading;
    agents.loading = client.api("GET", "agents").then((result) => {
      agents.loading = null;
      if (!result.ok || !Array.isArray(result.data)) return;
      agents.list = result.data;
      renderButton();
      actions.listed(); // a newer version of the shown chat's agent may be listed now
    });
    return agents.loading;
  }

  /** Those shown on this page, the site's default first. */
  function here() {
    const shown = (agents.list || []).filter(
      (agent) => agent.showsOn === place || agent.showsOn === "both",
    );
    return shown.sort((a, b) => Number(b.isDefault) - Number(a.isDefault));
  }

  function listed(slug) {
    return (agents.list || []).find((agent) => agent.slug === slug) || null;
  }

  function renderButton() {
    const picker = here().length > 1;
    if (picker) {
      ui.newSession.setAttribute("aria-haspopup", "menu");
      ui.newSession.setAttribute("aria-expanded", String(agents.menuOpen));
    } else {
      ui.newSession.removeAttribute("aria-haspopup");
      ui.newSession.removeAttribute("aria-expanded");
      if (agents.menuOpen) closeMenu(false);
    }
  }

  function items() {
    return [...ui.agentMenu.querySelectorAll('[role="menuitem"]')];
  }

  function openMenu() {
    const choices = here();
    fill(
      ui.agentMenu,
      ...choices.map((agent) =>
        el(
          "button",
          {
            type: "button",
            role: "menuitem",
            tabindex: "-1",
            className: "ahentic-agent-choice",
            "data-agent": agent.slug,
            onclick: () => pick(agent.slug),
          },
          dot(agent.colour),
          el("span", { className: "ahentic-agent-choice-name", text: agent.name }),
          agent.description
            ? el("span", { className: "ahentic-agent-choice-text", text: agent.description })
            : null,
        ),
      ),
    );
    agents.menuOpen = true;
    show(ui.agentMenu, true);
    renderButton();
    const first = items()[0];
    if (first) first.focus();
  }

  function closeMenu(focusButton) {
    agents.menuOpen = false;
    show(ui.agentMenu, false);
    renderButton();
    if (focusButton) ui.newSession.focus();
  }

  async function pick(slug) {
    closeMenu(false);
    await actions.create(slug);
  }

  /** The new-chat button: the picker when several agents show here, else a chat at once. */
  async function newChat() {
    if (agents.menuOpen) {
      closeMenu(true);
      return;
    }
    if (agents.list === null) await refresh();
    else refresh(); // for next time: agents added or changed meanwhile
    const choices = here();
    if (choices.length > 1) openMenu();
    else await actions.create(choices.length ? choices[0].slug : null);
  }

  function onMenuKeydown(event) {
    const all = items();
    const index = all.indexOf(document.activeElement);
    const moves = { ArrowDown: 1, ArrowUp: -1, Home: "first", End: "last" };
    if (event.key in moves) {
      event.preventDefault();
      const step = moves[event.key];
      const next =
        step === "first"
          ? 0
          : step === "last"
            ? all.length - 1
            : (Math.max(index, 0) + step + all.length) % all.length;
      if (all[next]) all[next].focus();
    } else if (event.key === "Escape") {
      event.preventDefault(); // the panel's own Escape (fold away) waits for the next one
      closeMenu(true);
    } else if (event.key === "Tab") {
      closeMenu(false);
    }
  }

  function wire() {
    ui.agentMenu.addEventListener("keydown", onMenuKeydown);
    document.addEventListener("click", (event) => {
      if (!agents.menuOpen) return;
      if (ui.agentMenu.contains(event.target) || ui.newSession.contains(event.target)) return;
      closeMenu(false);
    });
  }

  // ------------------------------------------------------------ the chat's agent

  /** The latest version this chat may move to (null: none newer, or the agent is not the
   * user's to use any more). The payload's number is as of its version; GET agents is current. */
  function newerVersion(p) {
    if (!p || !p.agent) return null;
    const agent = listed(p.agent.slug);
    if (agents.list !== null && !agent) return null;
    const latest = Math.max(p.agent.latestVersion || 0, agent ? agent.version || 0 : 0);
    return latest > p.agent.version ? latest : null;
  }

  function renderHeader(s) {
    const p = s && s.payload;
    const agent = p && p.agent;
    if (!changed(ui.brand, JSON.stringify(agent || null))) return;
    if (!agent) {
      fill(ui.brand, gettext("Agent"));
      ui.brand.removeAttribute("title");
      return;
    }
    fill(
      ui.brand,
      dot(agent.colour),
      el("span", { className: "ahentic-agent-name", "data-role": "agent-name", text: agent.name }),
      " ",
      el("span", { className: "ahentic-agent-version", text: "v" + agent.version }),
    );
    ui.brand.title = gettext("This chat is with %(agent)s, version %(version)s", {
      agent: agent.name,
      version: agent.version,
    });
  }

  async function loadChanges(s) {
    s.agentPreview = { loading: true };
    renderUpdate(s);
    const result = await client.api("GET", sessionPath(s.id, "agent/latest"));
    s.agentPreview = result.ok ? result.data : { error: result.data };
    if (s.id === app.state.active) renderUpdate(s, true);
  }

  async function moveToLatest(s) {
    s.agentMoving = true;
    renderUpdate(s);
    const result = await client.api("POST", sessionPath(s.id, "agent/latest"), {});
    s.agentMoving = false;
    if (result.ok) {
      s.agentPreview = null;
      s.agentMoved = { version: result.data.agent.version, changes: result.data.changes || [] };
      actions.applyPayload(s, result.data, result.etag);
    } else {
      actions.setError(s, result.data);
    }
    renderUpdate(s, true);
    refresh();
  }

  function renderUpdate(s, force) {
    const p = s && s.payload;
    const latest = newerVersion(p);
    const moved = s && s.agentMoved;
    const live = actions.isLive(p);
    const key = JSON.stringify([
      s && s.id,
      latest,
      p && p.agent,
      live,
      !!(s && s.agentMoving),
      s && s.agentPreview,
      moved,
    ]);
    if (!changed(ui.agentUpdate, key) && !force) return;
    if (!p || (!latest && !moved)) {
      fill(ui.agentUpdate);
      show(ui.agentUpdate, false);
      return;
    }
    if (!latest) {
      // Moved: say what changed until the reader dismisses it.
      fill(
        ui.agentUpdate,
        el("p", {
          className: "ahentic-agent-update-text",
          text: gettext("This chat now uses %(agent)s v%(version)s.", {
            agent: p.agent.name,
            version: moved.version,
          }),
        }),
        changeList(moved.changes),
        el("button", {
          type: "button",
          className: "ahentic-link",
          text: gettext("Dismiss"),
          onclick: () => {
            s.agentMoved = null;
            renderUpdate(s);
          },
        }),
      );
      show(ui.agentUpdate, true);
      return;
    }
    const preview = s.agentPreview;
    const details = el(
      "details",
      { className: "ahentic-agent-preview", open: !!preview },
      el("summary", { text: gettext("What changes") }),
      !preview || preview.loading
        ? el("p", { className: "ahentic-muted", text: gettext("Loading…") })
        : preview.error
          ? el("p", { className: "ahentic-muted", text: preview.error.detail || gettext("Not available.") })
          : changeList(preview.changes),
    );
    details.addEventListener("toggle", () => {
      if (details.open && !s.agentPreview) loadChanges(s);
      if (!details.open) s.agentPreview = null;
    });
    fill(
      ui.agentUpdate,
      el("p", {
        className: "ahentic-agent-update-text",
        text: gettext("This chat uses %(agent)s v%(version)s; v%(latest)s is available.", {
          agent: p.agent.name,
          version: p.agent.version,
          latest,
        }),
      }),
      details,
      el("button", {
        type: "button",
        className: "ahentic-button",
        text: s.agentMoving
          ? gettext("Moving…")
          : gettext("Move this chat to v%(latest)s", { latest }),
        disabled: live || !!s.agentMoving,
        title: live ? gettext("Wait for the run to end") : null,
        onclick: () => moveToLatest(s),
      }),
    );
    show(ui.agentUpdate, true);
  }

  function render(s) {
    renderHeader(s);
    renderUpdate(s);
  }

  return { refresh, newChat, render, wire };
}

/*
 * Chat tabs. Tabs are a WAI-ARIA tablist: one tab in the focus order,
 * arrow keys (and Home/End) move between tabs and open them, Delete closes the focused one (the
 * APG tabs pattern). A tablist may own only tabs, so each tab's × button is for the pointer and
 * hidden from assistive technology; the keyboard closes with Delete. The active tab is always
 * scrolled into view, whatever the number of open chats.
 */
import { changed, el, fill, show } from "./dom.js";
import { gettext } from "./i18n.js";

export function statusOf(app, s) {
  if (!s || !s.payload) return "none";
  return s.stopping ? "idle" : s.payload.status;
}

/** Scroll the tab strip (only it, never the page) so the active tab is fully visible. */
function revealActive(strip) {
  const tab = strip.querySelector(".ahentic-tab.is-active");
  if (!tab) return;
  const left = tab.offsetLeft; // the strip is position: relative, the tabs' offset parent
  const right = left + tab.offsetWidth;
  if (left < strip.scrollLeft) strip.scrollLeft = left;
  else if (right > strip.scrollLeft + strip.clientWidth) strip.scrollLeft = right - strip.clientWidth;
}

function onKeydown(app, event) {
  const { state } = app;
  const keys = { ArrowLeft: -1, ArrowRight: 1, Home: "first", End: "last", Delete: 0 };
  if (!(event.key in keys) || !state.tabs.length) return;
  if (!event.target.matches('[role="tab"]')) return;
  if (event.key === "Delete") {
    event.preventDefault();
    app.closeTab(event.target.closest(".ahentic-tab").dataset.session);
    const next = app.ui.tabs.querySelector(".ahentic-tab.is-active [role='tab']");
    (next || app.ui.input).focus(); // the last chat closed: the message box starts a new one
    return;
  }
  event.preventDefault();
  const index = state.tabs.findIndex((tab) => tab.id === state.active);
  const step = keys[event.key];
  const count = state.tabs.length;
  const next =
    step === "first" ? 0 : step === "last" ? count - 1 : (Math.max(index, 0) + step + count) % count;
  app.activate(state.tabs[next].id);
  const button = app.ui.tabs.querySelector(".ahentic-tab.is-active [role='tab']");
  if (button) button.focus();
}

export function wireTabs(app) {
  app.ui.tabs.addEventListener("keydown", (event) => onKeydown(app, event));
  // The strip's width changes with the panel (docking, a resized window): keep the tab shown.
  if (typeof ResizeObserver === "function") {
    new ResizeObserver(() => revealActive(app.ui.tabs)).observe(app.ui.tabs);
  }
}

export function renderTabs(app) {
  const { state, ui } = app;
  const shown = state.tabs.map((tab) => {
    const s = state.sessions.get(tab.id);
    return [tab.id, statusOf(app, s), (s && s.payload && s.payload.title) || tab.title];
  });
  // Polls re-render often; rebuilding unchanged tabs would steal keyboard focus.
  if (changed(ui.tabs, JSON.stringify([state.active, shown]))) {
    const hadFocus = ui.tabs.contains(document.activeElement);
    const tabs = state.tabs.map((tab) => {
      const s = state.sessions.get(tab.id);
      const selected = tab.id === state.active;
      const title = (s && s.payload && s.payload.title) || tab.title || gettext("New Agent");
      return el(
        "div",
        {
          className: "ahentic-tab" + (selected ? " is-active" : ""),
          "data-session": tab.id,
          "data-status": statusOf(app, s),
        },
        el(
          "button",
          {
            type: "button",
            role: "tab",
            className: "ahentic-tab-title",
            "aria-selected": String(selected),
            "aria-controls": "ahentic-panel",
            "aria-keyshortcuts": "Delete",
            tabindex: selected ? "0" : "-1",
            title,
            onclick: () => app.activate(tab.id),
          },
          el("span", { className: "ahentic-dot", "aria-hidden": "true" }),
          el("span", { className: "ahentic-tab-text", text: title }),
        ),
        el("button", {
          type: "button",
          className: "ahentic-tab-close",
          "aria-label": gettext("Close chat %(title)s", { title }),
          "aria-hidden": "true",
          tabindex: "-1",
          text: "×",
          onclick: () => app.closeTab(tab.id),
        }),
      );
    });
    fill(ui.tabs, ...tabs);
    if (hadFocus) {
      const active = ui.tabs.querySelector(".ahentic-tab.is-active [role='tab']");
      if (active) active.focus();
    }
  }
  revealActive(ui.tabs);
  const attention = state.tabs.some((tab) => {
    const s = state.sessions.get(tab.id);
    return s && s.payload && s.payload.status === "awaiting_human";
  });
  show(ui.launcherDot, attention);
}

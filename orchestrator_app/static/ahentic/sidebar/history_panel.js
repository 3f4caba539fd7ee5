/*
 * History: every chat of the user in a panel, newest activity first, grouped by day (Today,
 * Yesterday, then dates in the page's language), each with its agent, when it last changed, its
 * status and an "Open" mark when it is open in a tab. A search box asks the server (titles and
 * the text of every message, not only what was loaded: GET sessions?q=); "Load more" pages on
 * with the list's cursor. Each chat can be renamed (PATCH title) and deleted; a deletion shows
 * "Deleted. Undo" for a few seconds (POST sessions/<id>/restore: the server keeps a deleted chat
 * for HISTORY_UNDO_S seconds, so the undo works from any tab and a closed tab still deletes).
 *
 * Keyboard: the header's History button opens the panel with focus in the search box; Down and
 * Up move through the chats (Home, End too), Enter opens one, Tab reaches its Rename and Delete
 * buttons, Escape closes the panel (or cancels a rename) and gives focus back to the button.
 *
 * createHistoryPanel(app, hooks): hooks.open(item) opens a chat in a tab, hooks.close(id) closes
 * its tab (after a deletion), hooks.openIds() the ids open in tabs; optional: hooks.opened() is
 * told when the panel opens, hooks.renamed(id, payload, etag) gets a renamed chat's payload.
 */
import { dot } from "./agents.js";
import { STATUS_TEXT } from "./cards.js";
import { el, fill, show } from "./dom.js";
import { gettext, locale } from "./i18n.js";

const PAGE = 30;
const SEARCH_DELAY_MS = 250;
const UNDO_MS = 8000;

function dayKey(date) {
  return date.getFullYear() + "-" + (date.getMonth() + 1) + "-" + date.getDate();
}

/** The heading of a chat's day: Today, Yesterday, else the date in the page's language. */
export function dayLabel(iso, now = new Date()) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return gettext("Earlier");
  if (dayKey(at) === dayKey(now)) return gettext("Today");
  const yesterday = new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1);
  if (dayKey(at) === dayKey(yesterday)) return gettext("Yesterday");
  const options = { weekday: "long", day: "numeric", month: "long" };
  if (at.getFullYear() !== now.getFullYear()) options.year = "numeric";
  return at.toLocaleDateString(locale(), options);
}

function timeOf(iso) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  return at.toLocaleTimeString(locale(), { hour: "2-digit", minute: "2-digit" });
}

const SVG = "http://www.w3.org/2000/svg";

/** A bin drawn in SVG (no emoji font needed), in the text colour. */
function trashIcon() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "14");
  svg.setAttribute("height", "14");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", "M2.5 4h11M6 4V2.5h4V4M4 4l.8 9.5h6.4L12 4M6.7 6.5v5M9.3 6.5v5");
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.3");
  path.setAttribute("stroke-linecap", "round");
  path.setAttribute("stroke-linejoin", "round");
  svg.append(path);
  return svg;
}

export function createHistoryPanel(app, hooks) {
  const { client, ui } = app;
  const list = {
    items: [],
    cursor: null,
    hasMore: false,
    query: "",
    loading: false,
    error: "",
    request: 0, // answers to an older request (a query typed since) are dropped
  };
  let searchTimer = null;
  let undoTimer = null;

  const button = el("button", {
    type: "button",
    className: "ahentic-icon-button ahentic-history-toggle",
    "data-role": "history-toggle",
    "data-keep-in-header": "", // a main control: never folded into the More menu (header.js)
    "aria-expanded": "false",
    "aria-controls": "ahentic-history-panel",
    "aria-label": gettext("History"),
    title: gettext("History: your earlier chats"),
    text: "☰",
  });
  const search = el("input", {
    type: "search",
    id: "ahentic-history-search",
    className: "ahentic-history-search",
    "data-role": "history-search",
    placeholder: gettext("Search titles and messages"),
    autocomplete: "off",
    maxlength: "200",
  });
  const closeButton = el("button", {
    type: "button",
    className: "ahentic-icon-button",
    "aria-label": gettext("Close history"),
    title: gettext("Close"),
    text: "×",
  });
  const status = el("p", { className: "ahentic-history-status", role: "status" });
  const groups = el("div", { className: "ahentic-history-groups", "data-role": "history-list" });
  const more = el("button", {
    type: "button",
    className: "ahentic-button ahentic-history-more",
    "data-role": "history-more",
    text: gettext("Load more"),
  });
  const panel = el(
    "section",
    {
      id: "ahentic-history-panel",
      className: "ahentic-history-panel",
      "data-role": "history-panel",
      role: "region",
      "aria-labelledby": "ahentic-history-title",
    },
    el(
      "div",
      { className: "ahentic-history-head" },
      el("h2", { id: "ahentic-history-title", text: gettext("History") }),
      closeButton,
    ),
    el("label", {
      className: "ahentic-visually-hidden",
      for: "ahentic-history-search",
      text: gettext("Search chats"),
    }),
    search,
    status,
    groups,
    more,
  );
  panel.hidden = true;
  more.hidden = true;
  const toast = el("div", { className: "ahentic-toast", "data-role": "toast", role: "status" });
  toast.hidden = true;

  ui.collapse.before(button);
  ui.panel.querySelector(".ahentic-header").after(panel);
  ui.panel.append(toast);

  // ------------------------------------------------------------------ loading

  async function load({ append = false } = {}) {
    const request = ++list.request;
    const params = new URLSearchParams({ limit: String(PAGE) });
    if (list.query) params.set("q", list.query);
    if (append && list.cursor) params.set("cursor", list.cursor);
    list.loading = true;
    renderStatus();
    const result = await client.api("GET", "sessions?" + params.toString());
    if (request !== list.request) return; // a newer search or reload answers instead
    list.loading = false;
    if (!result.ok) {
      list.error = (result.data && result.data.detail) || gettext("Could not load your chats.");
      render();
      return;
    }
    list.error = "";
    const page = result.data.sessions || [];
    list.items = append ? list.items.concat(page) : page;
    list.cursor = result.data.nextCursor;
    list.hasMore = !!result.data.hasMore;
    render();
  }

  function scheduleSearch() {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      list.query = search.value.trim();
      list.cursor = null;
      load();
    }, SEARCH_DELAY_MS);
  }

  // ------------------------------------------------------------------ rendering

  function renderStatus() {
    let text = "";
    if (list.error) text = list.error;
    else if (list.loading && !list.items.length) text = gettext("Loading…");
    else if (!list.items.length && list.query) text = gettext("No chat matches your search.");
    else if (!list.items.length) text = gettext("No chats yet.");
    status.textContent = text;
    status.classList.toggle("is-error", !!list.error);
  }

  function itemNode(item, openIds) {
    const title = item.title || gettext("New Agent");
    const isOpen = openIds.has(item.id);
    const agent = item.agent;
    const meta = [
      agent ? agent.name : "",
      timeOf(item.modifiedAt),
      item.status && item.status !== "idle" ? STATUS_TEXT[item.status] || "" : "",
    ].filter(Boolean);
    const openLabel = el(
      "button",
      {
        type: "button",
        className: "ahentic-history-open",
        "data-session": item.id,
        onclick: () => choose(item),
      },
      el("span", { className: "ahentic-history-title", text: title }),
      el(
        "span",
        { className: "ahentic-history-meta" },
        agent ? dot(agent.colour) : null,
        meta.join(" · "),
        isOpen
          ? el("span", { className: "ahentic-history-badge", text: gettext("Open in a tab") })
          : null,
      ),
      item.match ? el("span", { className: "ahentic-history-match", text: item.match }) : null,
    );
    return el(
      "li",
      { className: "ahentic-history-item" + (isOpen ? " is-open" : ""), "data-session": item.id },
      openLabel,
      el("button", {
        type: "button",
        className: "ahentic-icon-button ahentic-history-rename",
        "aria-label": gettext("Rename %(title)s", { title }),
        title: gettext("Rename"),
        text: "✎",
        onclick: () => startRename(item),
      }),
      el(
        "button",
        {
          type: "button",
          className: "ahentic-icon-button ahentic-history-delete",
          "aria-label": gettext("Delete %(title)s", { title }),
          title: gettext("Delete"),
          onclick: () => remove(item),
        },
        trashIcon(),
      ),
    );
  }

  function render() {
    const openIds = new Set(hooks.openIds());
    const byDay = [];
    for (const item of list.items) {
      const label = dayLabel(item.modifiedAt);
      const last = byDay[byDay.length - 1];
      if (last && last.label === label) last.items.push(item);
      else byDay.push({ label, items: [item] });
    }
    const focusedId = focusedSession();
    fill(
      groups,
      byDay.map((group, index) => {
        const id = "ahentic-history-day-" + index;
        return el(
          "div",
          { className: "ahentic-history-day" },
          el("h3", { id, text: group.label }),
          el(
            "ul",
            { "aria-labelledby": id },
            group.items.map((item) => itemNode(item, openIds)),
          ),
        );
      }),
    );
    show(more, list.hasMore);
    more.disabled = list.loading;
    renderStatus();
    if (focusedId) focusItem(focusedId);
  }

  // ------------------------------------------------------------------ keyboard

  function openButtons() {
    return Array.from(groups.querySelectorAll(".ahentic-history-open"));
  }

  function focusedSession() {
    const row = document.activeElement && document.activeElement.closest(".ahentic-history-item");
    return row && groups.contains(row) && document.activeElement.matches(".ahentic-history-open")
      ? row.dataset.session
      : null;
  }

  function focusItem(id) {
    const target = openButtons().find((node) => node.dataset.session === id);
    if (target) target.focus();
  }

  function onKeydown(event) {
    if (event.key === "Escape") {
      if (event.target.matches(".ahentic-history-rename-input")) return; // the rename's own
      event.preventDefault();
      close();
      return;
    }
    const buttons = openButtons();
    if (!buttons.length) return;
    const inList = groups.contains(event.target);
    const fromSearch = event.target === search;
    if (!inList && !fromSearch) return;
    if (event.target.matches("input") && !fromSearch) return;
    const row = event.target.closest(".ahentic-history-item");
    const current = row ? buttons.indexOf(row.querySelector(".ahentic-history-open")) : -1;
    let next = null;
    if (event.key === "ArrowDown") next = fromSearch ? 0 : Math.min(current + 1, buttons.length - 1);
    else if (event.key === "ArrowUp") next = current <= 0 ? null : current - 1;
    else if (event.key === "Home" && inList) next = 0;
    else if (event.key === "End" && inList) next = buttons.length - 1;
    else return;
    event.preventDefault();
    if (next === null) search.focus();
    else buttons[next].focus();
  }

  // ------------------------------------------------------------------ actions

  function choose(item) {
    close({ restoreFocus: false });
    hooks.open(item);
  }

  function startRename(item) {
    const row = groups.querySelector('.ahentic-history-item[data-session="' + item.id + '"]');
    if (!row) return;
    const title = item.title || "";
    const input = el("input", {
      type: "text",
      className: "ahentic-history-rename-input",
      value: title,
      maxlength: "255",
      "aria-label": gettext("New title for %(title)s", { title }),
    });
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const text = input.value.trim();
      if (!save || !text || text === title) {
        render();
        focusItem(item.id);
        return;
      }
      const result = await client.api("PATCH", "sessions/" + encodeURIComponent(item.id), {
        title: text,
      });
      if (result.ok) {
        item.title = result.data.title;
        if (hooks.renamed) hooks.renamed(item.id, result.data, result.etag);
        list.error = "";
      } else {
        list.error = (result.data && result.data.detail) || gettext("Could not rename the chat.");
      }
      render();
      focusItem(item.id);
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
    fill(row, input);
    input.focus();
    input.select();
  }

  async function remove(item) {
    const buttons = openButtons();
    const index = buttons.findIndex((node) => node.dataset.session === item.id);
    const result = await client.api("DELETE", "sessions/" + encodeURIComponent(item.id));
    if (!result.ok && result.status !== 404) {
      list.error = (result.data && result.data.detail) || gettext("Could not delete the chat.");
      render();
      return;
    }
    list.items = list.items.filter((other) => other.id !== item.id);
    hooks.close(item.id);
    render();
    // Keep keyboard users where they were: the next chat, else the previous, else the search.
    const rest = openButtons();
    const target = rest[Math.min(index, rest.length - 1)];
    if (target) target.focus();
    else if (!panel.hidden) search.focus();
    showUndo(item);
  }

  function showUndo(item) {
    clearTimeout(undoTimer);
    const undo = el("button", {
      type: "button",
      className: "ahentic-button ahentic-toast-undo",
      "data-role": "undo",
      text: gettext("Undo"),
      onclick: async () => {
        undo.disabled = true;
        const result = await client.api(
          "POST",
          "sessions/" + encodeURIComponent(item.id) + "/restore",
        );
        if (result.ok) {
          fill(toast, el("span", { text: gettext("Restored %(title)s.", { title: titleOf(item) }) }));
          if (!panel.hidden) load();
        } else {
          fill(
            toast,
            el("span", { text: gettext("Too late to undo: the chat is deleted for good.") }),
          );
        }
        undoTimer = setTimeout(() => show(toast, false), 3000);
      },
    });
    fill(
      toast,
      el("span", { text: gettext("Deleted %(title)s.", { title: titleOf(item) }) }),
      undo,
    );
    show(toast, true);
    undoTimer = setTimeout(() => show(toast, false), UNDO_MS);
  }

  function titleOf(item) {
    return "“" + (item.title || gettext("New Agent")) + "”";
  }

  // ------------------------------------------------------------------ open and close

  function open() {
    panel.hidden = false;
    ui.panel.classList.add("is-history-open");
    button.setAttribute("aria-expanded", "true");
    button.classList.add("is-active");
    list.cursor = null;
    render();
    load();
    search.focus();
    if (hooks.opened) hooks.opened();
  }

  function close({ restoreFocus = true } = {}) {
    if (panel.hidden) return;
    panel.hidden = true;
    ui.panel.classList.remove("is-history-open");
    button.setAttribute("aria-expanded", "false");
    button.classList.remove("is-active");
    if (restoreFocus) button.focus();
  }

  button.addEventListener("click", () => (panel.hidden ? open() : close()));
  closeButton.addEventListener("click", () => close());
  search.addEventListener("input", scheduleSearch);
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      clearTimeout(searchTimer);
      list.query = search.value.trim();
      load();
    }
  });
  more.addEventListener("click", () => load({ append: true }));
  panel.addEventListener("keydown", onKeydown);

  return {
    open,
    close,
    isOpen: () => !panel.hidden,
    /** Re-render (the tabs changed: the "Open in a tab" marks follow). */
    render: () => {
      if (!panel.hidden) render();
    },
  };
}

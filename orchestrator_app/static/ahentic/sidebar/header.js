/*
 * The header's controls: the "More" menu, the view mode in it.
 *
 * View mode: Basic, Verbose and Debug as menuitemradio items in a group at the top of the
 * More menu (so the header keeps its room for the agent's name). Verbose and Debug show tool
 * traffic and raw blocks: only staff are offered them (config.staff); a chat left in one of
 * them offers Basic to anyone. Choosing one calls app.changeViewMode.
 *
 * More: the secondary buttons (dock, debugger, and those other modules add: Settings, MCP access,
 * Connections) live in one menu behind a "More" button (aria-haspopup="menu"), so the title has
 * room. wire() runs after the other modules added their buttons to the header and moves every
 * header button but More, collapse and those marked data-keep-in-header (History)
 * into the menu, as menu items: a toggle (aria-pressed) becomes a menuitemcheckbox whose
 * aria-checked follows its module's aria-pressed.
 * Up/Down/Home/End move between items, Escape and Tab close the menu (focus back on More), a click
 * outside closes it, choosing an item runs it and closes the menu.
 */
import { el } from "./dom.js";
import { gettext } from "./i18n.js";

const VIEW_MODES = [
  ["basic", gettext("Basic")],
  ["verbose", gettext("Verbose")],
  ["debug", gettext("Debug")],
];

export function createHeader(app) {
  const { config, ui } = app;
  const radios = VIEW_MODES.map(([value, label]) =>
    el(
      "button",
      {
        type: "button",
        role: "menuitemradio",
        className: "ahentic-menu-item ahentic-view-choice",
        "data-view-mode": value,
        "aria-checked": "false",
        tabindex: "-1",
        disabled: true,
      },
      el("span", { className: "ahentic-menu-icon", "aria-hidden": "true" }),
      el("span", { className: "ahentic-menu-label", text: label }),
    ),
  );

  function renderViewMode(p) {
    const current = p ? p.viewMode : "basic";
    let offered = 0;
    radios.forEach((radio) => {
      const on = radio.dataset.viewMode === current;
      radio.disabled = !p;
      radio.setAttribute("aria-checked", String(on));
      radio.hidden = !config.staff && radio.dataset.viewMode !== "basic";
      if (!radio.hidden) offered++;
    });
    // Basic alone is no choice: the group shows for staff, or to leave another mode.
    ui.viewMode.hidden = offered < 2 && current === "basic";
    ui.viewMode.setAttribute("aria-disabled", String(!p));
  }

  function wireViewMode() {
    ui.viewMode.replaceChildren(...radios);
    radios.forEach((radio) => {
      radio.addEventListener("click", () => {
        if (radio.disabled || radio.getAttribute("aria-checked") === "true") return;
        app.changeViewMode(radio.dataset.viewMode);
      });
    });
    renderViewMode(null);
  }

  // ---------------------------------------------------------------- the More menu

  // The items shown (a module hides its button when it has nothing to offer; CSS hides the
  // dock button on a phone).
  const items = () =>
    [...ui.moreMenu.querySelectorAll('[role^="menuitem"]')].filter(
      (i) => i.getClientRects().length && !i.disabled,
    );

  function asMenuItem(button) {
    if (button.classList.contains("ahentic-menu-item")) return;
    button.classList.add("ahentic-menu-item");
    button.tabIndex = -1;
    const label = button.getAttribute("title") || button.getAttribute("aria-label") || "";
    if (!button.querySelector(".ahentic-menu-label")) {
      const icon = el("span", { className: "ahentic-menu-icon", "aria-hidden": "true" });
      icon.append(...button.childNodes);
      button.replaceChildren(icon, el("span", { className: "ahentic-menu-label", text: label }));
    }
    if (!button.hasAttribute("aria-pressed")) {
      button.setAttribute("role", "menuitem");
      return;
    }
    // Its module keeps setting aria-pressed; a menu item says the same with aria-checked.
    button.setAttribute("role", "menuitemcheckbox");
    const mirror = () => {
      if (!button.hasAttribute("aria-pressed")) return;
      button.setAttribute("aria-checked", button.getAttribute("aria-pressed"));
      button.removeAttribute("aria-pressed");
    };
    mirror();
    new MutationObserver(mirror).observe(button, { attributes: true, attributeFilter: ["aria-pressed"] });
  }

  function gather() {
    const header = ui.more.closest(".ahentic-header");
    const kept = new Set([ui.more, ui.collapse]);
    for (const button of header.querySelectorAll("button")) {
      if (kept.has(button) || "keepInHeader" in button.dataset) continue;
      if (ui.viewMode.contains(button) || ui.moreMenu.contains(button)) continue;
      ui.moreMenu.append(button);
      asMenuItem(button);
    }
    for (const button of ui.moreMenu.querySelectorAll("button")) {
      if (!ui.viewMode.contains(button)) asMenuItem(button);
    }
  }

  function isOpen() {
    return !ui.moreMenu.hidden;
  }

  function open(focusLast) {
    ui.moreMenu.hidden = false;
    ui.more.setAttribute("aria-expanded", "true");
    const shown = items();
    if (shown.length) (focusLast ? shown[shown.length - 1] : shown[0]).focus();
  }

  function close(returnFocus) {
    if (!isOpen()) return;
    ui.moreMenu.hidden = true;
    ui.more.setAttribute("aria-expanded", "false");
    if (returnFocus) ui.more.focus();
  }

  function wireMenu() {
    gather();
    ui.more.addEventListener("click", () => (isOpen() ? close(false) : open(false)));
    ui.more.addEventListener("keydown", (event) => {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        open(event.key === "ArrowUp");
      }
    });
    ui.moreMenu.addEventListener("keydown", (event) => {
      const shown = items();
      const at = shown.indexOf(document.activeElement);
      const moves = {
        ArrowDown: (at + 1) % shown.length,
        ArrowUp: (at - 1 + shown.length) % shown.length,
        Home: 0,
        End: shown.length - 1,
      };
      if (event.key in moves && shown.length) {
        event.preventDefault();
        shown[moves[event.key]].focus();
      } else if (event.key === "Escape") {
        event.preventDefault(); // the panel's own Escape (layout.js) leaves it alone
        event.stopPropagation();
        close(true);
      } else if (event.key === "Tab") {
        close(false);
      }
    });
    // Choosing an item runs it (its module's click handler), then the menu closes.
    // A view mode chosen: focus goes back to More, where the menu was opened.
    ui.moreMenu.addEventListener("click", (event) => {
      const item = event.target.closest('[role^="menuitem"]');
      if (item) close(ui.viewMode.contains(item));
    });
    document.addEventListener("pointerdown", (event) => {
      if (isOpen() && !ui.moreMenu.contains(event.target) && !ui.more.contains(event.target)) {
        close(false);
      }
    });
  }

  /** Close the newest panel opened from the menu (a checked or expanded item but Dock and
   * the view mode) and give the focus to More; false when none is open. */
  function closeOpenPanel() {
    const open = [...ui.moreMenu.querySelectorAll('[aria-checked="true"], [aria-expanded="true"]')]
      .filter((item) => item !== ui.dock && !ui.viewMode.contains(item))
      .pop();
    if (!open) return false;
    open.click();
    ui.more.focus();
    return true;
  }

  function wire() {
    wireViewMode();
    wireMenu();
  }

  return { wire, renderViewMode, closeMenu: close, closeOpenPanel };
}

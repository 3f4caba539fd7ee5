/*
 * The keyboard shortcuts:
 *   "/"            open the sidebar at the message box, when the focus is not in a text field
 *                  (as on GitHub, YouTube, Gmail)
 *   Alt+Shift+A    the same, anywhere, a text field included (the admin's forms)
 *   Alt+Shift+N    a new chat, anywhere (the "+" button: its agent picker when there is one)
 *   "?"            the list of shortcuts, when the focus is not in a text field
 *   Escape         closes the innermost open thing: a menu, a panel, the preview, the sidebar
 *                  (layout.js and each menu's own handler)
 * None is a browser's or the Django admin's own. A page that handles the key first (calls
 * preventDefault) keeps it. The launcher states the opening ones in its title and
 * aria-keyshortcuts. The list is a small dialog in the panel: Close or Escape closes it and
 * focus goes back where it was.
 */
import { el, show } from "./dom.js";
import { gettext } from "./i18n.js";

export const KEYSHORTCUTS = "/ Alt+Shift+A";

function inTextField(target) {
  if (!target || !target.closest) return false;
  if (target.isContentEditable) return true;
  const field = target.closest("input, textarea, select, [contenteditable='true']");
  if (!field) return false;
  const type = (field.getAttribute("type") || "text").toLowerCase();
  return !(field.tagName === "INPUT" && ["button", "checkbox", "radio", "submit"].includes(type));
}

/** Alt+Shift and the letter ``code`` (event.code: with Alt, Option on a Mac, event.key is
 * another character). */
function altShift(event, code) {
  return event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey && event.code === code;
}

/** A key alone, outside text fields. */
function bare(event, key) {
  return (
    event.key === key &&
    !event.ctrlKey &&
    !event.metaKey &&
    !event.altKey &&
    !inTextField(event.target)
  );
}

/** Which shortcut a key event is: "open", "new", "help" or null. */
export function shortcutOf(event) {
  if (event.defaultPrevented || event.isComposing) return null;
  if (altShift(event, "KeyA") || bare(event, "/")) return "open";
  if (altShift(event, "KeyN")) return "new";
  if (bare(event, "?")) return "help";
  return null;
}

/** True for the keys that open the sidebar at the message box. */
export function isShortcut(event) {
  return shortcutOf(event) === "open";
}

const LIST = [
  ["/", gettext("Open the agent at the message box")],
  ["Alt+Shift+A", gettext("The same, also from a text field")],
  ["Alt+Shift+N", gettext("New chat")],
  ["Enter", gettext("Send the message")],
  ["Shift+Enter", gettext("New line in the message")],
  ["↑", gettext("In an empty message box: edit your last message")],
  ["Esc", gettext("Close the open menu, panel or preview; then the agent")],
  ["?", gettext("Show this list")],
];

/** Listen for the shortcuts; ``focusComposer()`` opens the panel and focuses the box. */
export function wireShortcuts(app, focusComposer) {
  const { ui } = app;
  ui.launcher.setAttribute("aria-keyshortcuts", KEYSHORTCUTS);
  ui.launcher.title = gettext("Open the agent (press / or Alt+Shift+A)");
  ui.newSession.setAttribute("aria-keyshortcuts", "Alt+Shift+N");

  const closeButton = el("button", {
    type: "button",
    className: "ahentic-link",
    "aria-label": gettext("Close the shortcut list"),
    text: gettext("Close"),
  });
  const heading = el("h2", {
    className: "ahentic-settings-title",
    id: "ahentic-shortcuts-title",
    text: gettext("Keyboard shortcuts"),
  });
  const list = el(
    "dl",
    { className: "ahentic-shortcut-list" },
    LIST.flatMap(([keys, what]) => [
      el("dt", {}, el("kbd", { text: keys })),
      el("dd", { text: what }),
    ]),
  );
  const panel = el(
    "div",
    {
      className: "ahentic-settings ahentic-shortcuts",
      role: "dialog",
      "aria-labelledby": "ahentic-shortcuts-title",
      "data-role": "shortcuts",
      tabindex: "-1",
    },
    el("div", { className: "ahentic-artifact-head" }, heading, closeButton),
    list,
  );
  show(panel, false);
  ui.error.before(panel);
  // Also in the More menu (header.js gathers it), for those who look for it there.
  const menuButton = el("button", {
    type: "button",
    className: "ahentic-icon-button",
    "aria-label": gettext("Keyboard shortcuts"),
    "aria-keyshortcuts": "?",
    title: gettext("Keyboard shortcuts"),
    text: "⌨",
  });
  ui.debugToggle.after(menuButton);
  menuButton.addEventListener("click", () => open());
  let returnTo = null;

  function open() {
    if (panel.hidden) {
      returnTo = document.activeElement;
      show(panel, true);
    }
    closeButton.focus();
  }

  function close() {
    if (panel.hidden) return false;
    show(panel, false);
    // An item of the (now closed) More menu: More takes the focus back.
    const back = returnTo && ui.moreMenu.contains(returnTo) ? ui.more : returnTo;
    returnTo = null;
    if (back && back.isConnected && back.getClientRects().length) back.focus();
    else ui.input.focus();
    return true;
  }

  closeButton.addEventListener("click", close);
  panel.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.preventDefault(); // the panel's own Escape (collapse) waits for the next one
    event.stopPropagation();
    close();
  });

  document.addEventListener("keydown", (event) => {
    const which = shortcutOf(event);
    if (!which) return;
    event.preventDefault();
    if (which === "open") {
      focusComposer();
    } else if (which === "new") {
      app.setCollapsed(false);
      ui.newSession.click();
    } else {
      app.setCollapsed(false);
      open();
    }
  });

  return { openShortcuts: open, closeShortcuts: close };
}

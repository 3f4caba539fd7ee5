/*
 * The keyboard shortcut that opens the sidebar and puts the cursor in the message box:
 *   "/"            when the focus is not in a text field (as on GitHub, YouTube, Gmail)
 *   Alt+Shift+A    anywhere, a text field included (the admin's forms)
 * Neither is a browser's or the Django admin's own. A page that handles the key first (calls
 * preventDefault) keeps it. The launcher states both in its title and aria-keyshortcuts.
 */
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

/** True for the shortcut's key events (exported for the tests' sake of the rule). */
export function isShortcut(event) {
  if (event.defaultPrevented || event.isComposing) return false;
  // event.code: with Alt (Option on a Mac) event.key is another character.
  if (event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey && event.code === "KeyA") {
    return true;
  }
  return (
    event.key === "/" &&
    !event.ctrlKey &&
    !event.metaKey &&
    !event.altKey &&
    !inTextField(event.target)
  );
}

/** Listen for the shortcut; ``focusComposer()`` opens the panel and focuses the box. */
export function wireShortcuts(app, focusComposer) {
  const { ui } = app;
  ui.launcher.setAttribute("aria-keyshortcuts", KEYSHORTCUTS);
  ui.launcher.title = gettext("Open the agent (press / or Alt+Shift+A)");
  document.addEventListener("keydown", (event) => {
    if (!isShortcut(event)) return;
    event.preventDefault();
    focusComposer();
  });
}

/*
 * Settings: the user's opt-outs of the agent's mails (GET/PATCH me/notifications). A button in
 * the panel's header opens a small panel under it with one labelled checkbox per mail; a change
 * is saved at once (and put back, with the error shown, when the server refuses it). Focus goes
 * to the first checkbox on open and back to the button on close (Close, Escape, the button).
 */
import { el, show } from "./dom.js";
import { gettext } from "./i18n.js";

const PATH = "me/notifications";
const OPTIONS = [
  ["approvalsMail", gettext("An approval has waited a while and I have not seen it")],
  ["schedulesMail", gettext("A scheduled run finishes or fails")],
];

export function createSettingsPanel(app) {
  const { client, ui } = app;
  const button = el("button", {
    type: "button",
    className: "ahentic-icon-button",
    "data-role": "settings-toggle",
    "aria-expanded": "false",
    "aria-controls": "ahentic-settings",
    "aria-label": gettext("Settings"),
    title: gettext("Settings"),
    text: "✉",
  });
  const status = el("p", { className: "ahentic-settings-status", role: "status" });
  const boxes = {};
  const rows = OPTIONS.map(([field, label]) => {
    const id = "ahentic-settings-" + field;
    boxes[field] = el("input", { type: "checkbox", id, "data-field": field, disabled: true });
    boxes[field].addEventListener("change", () => save(field));
    return el("div", { className: "ahentic-settings-row" }, boxes[field], el("label", { for: id, text: label }));
  });
  const close = el("button", { type: "button", className: "ahentic-button", text: gettext("Close") });
  const panel = el(
    "section",
    {
      id: "ahentic-settings",
      className: "ahentic-settings",
      "data-role": "settings",
      role: "region",
      "aria-labelledby": "ahentic-settings-title",
    },
    el("h2", { id: "ahentic-settings-title", className: "ahentic-settings-title", text: gettext("Settings") }),
    el("fieldset", {}, el("legend", { text: gettext("Email me when") }), rows),
    status,
    close,
  );
  panel.hidden = true;
  ui.collapse.before(button);
  ui.panel.querySelector(".ahentic-header").after(panel);

  let saved = {};

  function draw(values) {
    saved = values;
    for (const [field] of OPTIONS) {
      boxes[field].checked = !!values[field];
      boxes[field].disabled = false;
    }
  }

  async function load() {
    status.textContent = gettext("Loading…");
    const result = await client.api("GET", PATH);
    if (!result.ok) {
      status.textContent = result.data.detail || gettext("Could not load the settings.");
      return;
    }
    draw(result.data);
    status.textContent = "";
  }

  async function save(field) {
    // The box stays enabled while it saves: disabling it would drop the keyboard focus.
    const value = boxes[field].checked;
    status.textContent = gettext("Saving…");
    const result = await client.api("PATCH", PATH, { [field]: value });
    if (result.ok) {
      draw(result.data);
      status.textContent = gettext("Saved.");
    } else {
      draw(saved); // the server's value stays
      status.textContent = result.data.detail || gettext("Could not save the setting.");
    }
  }

  function setOpen(open) {
    show(panel, open);
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      load().then(() => {
        if (!panel.hidden) boxes[OPTIONS[0][0]].focus();
      });
    } else {
      button.focus();
      // In the header's closed More menu the button cannot take focus: More takes it.
      if (document.activeElement !== button && ui.more) ui.more.focus();
    }
  }

  button.addEventListener("click", () => setOpen(panel.hidden));
  close.addEventListener("click", () => setOpen(false));
  panel.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.preventDefault(); // the panel's own Escape (collapse) waits for the next one
    setOpen(false);
  });

  return { open: () => setOpen(true), close: () => setOpen(false) };
}

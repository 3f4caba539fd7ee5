/*
 * Attachments: images (PNG, JPEG, GIF, WebP) and PDFs sent with a message.
 *
 * The composer gets an attach button (a file input), paste (files on the clipboard) and drag and
 * drop. Each file is uploaded at once to the chat (POST sessions/{id}/attachments) and shown as
 * a removable thumbnail above the text box; Send posts the uploads' ids with the message. The
 * transcript shows a message's attachments as thumbnails (images, from the owner-only URL) or
 * file chips (PDFs). The server decides what a file is from its bytes; its refusals
 * (type, size, count) show as the chat's error. The uploads themselves (each chat's list, the
 * upload calls) are in uploads.js; this module has the widgets.
 */
import { el, fill, show } from "./dom.js";
import { gettext } from "./i18n.js";
import { createUploads } from "./uploads.js";

export const ACCEPT = "image/png,image/jpeg,image/gif,image/webp,application/pdf";

/** Thumbnails of attachments ({name, contentType, url, width, height}); null when none. */
export function attachmentsNode(attachments) {
  if (!attachments || !attachments.length) return null;
  return el(
    "div",
    { className: "ahentic-attachments" },
    attachments.map((item) => {
      const isImage = String(item.contentType || "").startsWith("image/");
      return el(
        "a",
        {
          className: "ahentic-attachment" + (isImage ? " is-image" : " is-file"),
          href: item.url,
          target: "_blank",
          rel: "noopener",
          title: item.name,
        },
        isImage
          ? el("img", { src: item.url, alt: item.name, loading: "lazy" })
          : el("span", {
              className: "ahentic-attachment-name",
              text: gettext("PDF · %(name)s", { name: item.name }),
            }),
      );
    }),
  );
}

/**
 * The composer's attachment widgets: the attach button, paste, drop, and the strip of removable
 * thumbnails above the text box. ``hooks``: ``session()`` resolves to the chat to upload into
 * (creating one when none is open), ``error(s, data)`` shows a refusal, ``render()`` redraws.
 * Returns the widgets' ``wire``/``render`` and the uploads' ``ids``, ``uploaded``,
 * ``uploading``, ``sent`` for the message being sent.
 */
export function createAttachments(app, hooks) {
  const ui = {};
  const uploads = createUploads(app, () => render());

  async function add(files) {
    files = Array.from(files || []).filter(Boolean);
    if (!files.length) return;
    const s = await hooks.session();
    if (!s) return;
    const refusal = await uploads.upload(s, files);
    if (refusal) hooks.error(s, refusal);
    hooks.render();
  }

  function render() {
    if (!ui.strip) return;
    const s = app.state.active ? { id: app.state.active } : null;
    const list = uploads.items(s);
    show(ui.strip, list.length > 0);
    fill(
      ui.strip,
      list.map((item) =>
        el(
          "div",
          {
            className: "ahentic-pending-attachment" + (item.status === "uploading" ? " is-busy" : ""),
            title: item.name,
            "data-status": item.status,
          },
          item.preview
            ? el("img", { src: item.preview, alt: item.name })
            : el("span", {
                className: "ahentic-attachment-name",
                text: gettext("PDF · %(name)s", { name: item.name }),
              }),
          el("button", {
            type: "button",
            className: "ahentic-attachment-remove",
            "aria-label": gettext("Remove %(name)s", { name: item.name }),
            text: "×",
            onclick: () => uploads.remove(s, item),
          }),
        ),
      ),
    );
  }

  function wire() {
    const { composer, input, send } = app.ui;
    ui.file = el("input", {
      type: "file",
      accept: ACCEPT,
      multiple: true,
      hidden: true,
      "data-role": "attach-input",
      onchange: () => {
        add(ui.file.files);
        ui.file.value = "";
      },
    });
    ui.button = el("button", {
      type: "button",
      className: "ahentic-button ahentic-attach",
      "data-role": "attach",
      "aria-label": gettext("Attach images or PDFs"),
      title: gettext("Attach images or PDFs (or paste, or drop them here)"),
      text: gettext("Attach"),
      onclick: () => ui.file.click(),
    });
    ui.strip = el("div", {
      className: "ahentic-pending-attachments",
      "data-role": "pending-attachments",
      hidden: true,
    });
    input.before(ui.strip);
    send.before(ui.button);
    composer.append(ui.file);
    input.addEventListener("paste", (event) => {
      const files = event.clipboardData ? Array.from(event.clipboardData.files) : [];
      if (!files.length) return; // text: the default paste
      event.preventDefault();
      add(files);
    });
    composer.addEventListener("dragover", (event) => {
      if (!event.dataTransfer || !Array.from(event.dataTransfer.types).includes("Files")) return;
      event.preventDefault();
      composer.classList.add("is-dropping");
    });
    composer.addEventListener("dragleave", () => composer.classList.remove("is-dropping"));
    composer.addEventListener("drop", (event) => {
      composer.classList.remove("is-dropping");
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      add(event.dataTransfer.files);
    });
  }

  const { ids, uploaded, uploading, sent } = uploads;
  return { wire, render, ids, uploaded, uploading, sent, add };
}

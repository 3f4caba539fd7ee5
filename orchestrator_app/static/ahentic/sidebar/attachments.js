/*
 * Attachments: images (PNG, JPEG, GIF, WebP) and PDFs sent with a message.
 *
 * The composer gets an attach button (a file input), paste (files on the clipboard) and drag and
 * drop. Each file is uploaded at once to the chat (POST sessions/{id}/attachments) and shown as
 * a removable thumbnail above the text box; Send posts the uploads' ids with the message. The
 * transcript shows a message's attachments as thumbnails (images, from the owner-only URL) or
 * file chips (PDFs). The server decides what a file is from its bytes; its refusals
 * (type, size, count) show as the chat's error.
 */
import { sessionPath } from "./api.js";
import { el, fill, show } from "./dom.js";

export const ACCEPT = "image/png,image/jpeg,image/gif,image/webp,application/pdf";

function csrfToken(app) {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : app.config.csrf;
}

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
          : el("span", { className: "ahentic-attachment-name", text: "PDF · " + item.name }),
      );
    }),
  );
}

/**
 * The composer's attachments. ``hooks``: ``session()`` resolves to the chat to upload into
 * (creating one when none is open), ``error(s, data)`` shows a refusal, ``render()`` redraws.
 */
export function createAttachments(app, hooks) {
  const bySession = new Map(); // session id -> [{localId, name, preview, status, attachment}]
  const ui = {};
  let counter = 0;

  function items(s) {
    if (!s) return [];
    if (!bySession.has(s.id)) bySession.set(s.id, []);
    return bySession.get(s.id);
  }

  function forget(item) {
    if (item.preview) URL.revokeObjectURL(item.preview);
  }

  async function add(files) {
    files = Array.from(files || []).filter(Boolean);
    if (!files.length) return;
    const s = await hooks.session();
    if (!s) return;
    const added = files.map((file) => ({
      localId: "att_" + ++counter,
      name: file.name || "pasted image",
      preview: /^image\//.test(file.type) ? URL.createObjectURL(file) : null,
      status: "uploading",
      attachment: null,
    }));
    items(s).push(...added);
    render();
    const form = new FormData();
    files.forEach((file, i) => form.append("file", file, added[i].name));
    let response = null;
    let data = null;
    try {
      response = await fetch(app.config.api + sessionPath(s.id, "attachments"), {
        method: "POST",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken(app) },
        credentials: "same-origin",
        body: form,
      });
      data = await response.json().catch(() => null);
    } catch (err) {
      data = { code: "ahentic_network", detail: "Network error." };
    }
    const list = items(s);
    if (response && response.ok && data && Array.isArray(data.attachments)) {
      added.forEach((item, i) => {
        item.attachment = data.attachments[i];
        item.status = "ready";
      });
    } else {
      added.forEach((item) => {
        forget(item);
        list.splice(list.indexOf(item), 1);
      });
      const status = response ? response.status : 0;
      hooks.error(
        s,
        data && data.code ? data : { code: "ahentic_http_" + status, detail: "Upload failed." },
      );
    }
    hooks.render();
  }

  function remove(s, item) {
    const list = items(s);
    const index = list.indexOf(item);
    if (index === -1) return;
    list.splice(index, 1);
    forget(item);
    if (item.attachment) {
      app.client.api("DELETE", sessionPath(s.id, "attachments/" + item.attachment.id));
    }
    render();
  }

  /** The ids of the active chat's uploads, for the message being sent. */
  function ids(s) {
    return items(s)
      .filter((item) => item.status === "ready")
      .map((item) => item.attachment.id);
  }

  function uploaded(s) {
    return items(s)
      .filter((item) => item.status === "ready")
      .map((item) => item.attachment);
  }

  function uploading(s) {
    return items(s).some((item) => item.status === "uploading");
  }

  /** The message took the uploads: clear the strip (the transcript shows them now). */
  function sent(s) {
    items(s).forEach(forget);
    bySession.set(s.id, []);
    render();
  }

  function render() {
    if (!ui.strip) return;
    const s = app.state.active ? { id: app.state.active } : null;
    const list = items(s);
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
            : el("span", { className: "ahentic-attachment-name", text: "PDF · " + item.name }),
          el("button", {
            type: "button",
            className: "ahentic-attachment-remove",
            "aria-label": "Remove " + item.name,
            text: "×",
            onclick: () => remove(s, item),
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
      "aria-label": "Attach images or PDFs",
      title: "Attach images or PDFs (or paste, or drop them here)",
      text: "Attach",
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

  return { wire, render, ids, uploaded, uploading, sent, add };
}

/*
 * Uploads: each chat's files attached to the message being written, and the upload calls
 * (POST sessions/{id}/attachments at once, DELETE when a file is removed). The composer's
 * widgets for them are in attachments.js.
 */
import { sessionPath } from "./api.js";
import { gettext } from "./i18n.js";

function csrfToken(app) {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : app.config.csrf;
}

/** Per-chat uploads: [{localId, name, preview, status, attachment}], status "uploading" or
 * "ready". ``changed()`` is called when a chat's list changes. */
export function createUploads(app, changed) {
  const bySession = new Map(); // session id -> the chat's uploads
  let counter = 0;

  function items(s) {
    if (!s) return [];
    if (!bySession.has(s.id)) bySession.set(s.id, []);
    return bySession.get(s.id);
  }

  function forget(item) {
    if (item.preview) URL.revokeObjectURL(item.preview);
  }

  /** Upload `files` to the chat `s`; resolves to null, or the server's refusal ({code, detail}). */
  async function upload(s, files) {
    const added = files.map((file) => ({
      localId: "att_" + ++counter,
      name: file.name || gettext("pasted image"),
      preview: /^image\//.test(file.type) ? URL.createObjectURL(file) : null,
      status: "uploading",
      attachment: null,
    }));
    items(s).push(...added);
    changed();
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
      data = { code: "ahentic_network", detail: gettext("Network error.") };
    }
    const list = items(s);
    if (response && response.ok && data && Array.isArray(data.attachments)) {
      added.forEach((item, i) => {
        item.attachment = data.attachments[i];
        item.status = "ready";
      });
      return null;
    }
    added.forEach((item) => {
      forget(item);
      list.splice(list.indexOf(item), 1);
    });
    const status = response ? response.status : 0;
    return data && data.code
      ? data
      : { code: "ahentic_http_" + status, detail: gettext("Upload failed.") };
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
    changed();
  }

  /** The ids of the chat's uploads, for the message being sent. */
  function ids(s) {
    return uploaded(s).map((attachment) => attachment.id);
  }

  function uploaded(s) {
    return items(s)
      .filter((item) => item.status === "ready")
      .map((item) => item.attachment);
  }

  function uploading(s) {
    return items(s).some((item) => item.status === "uploading");
  }

  /** The message took the uploads: clear the chat's list (the transcript shows them now). */
  function sent(s) {
    items(s).forEach(forget);
    bySession.set(s.id, []);
    changed();
  }

  return { items, upload, remove, ids, uploaded, uploading, sent };
}

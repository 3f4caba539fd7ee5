/*
 * Reply actions: Copy, Retry and Edit on the transcript's bubbles, the earlier attempts that a
 * retry or an edit leaves (folded under "Earlier attempt"), and editing the user's last
 * message in the composer (its Edit button, or Up in an empty message box).
 *
 * Bubbles are built once and reused (transcript.js), so their buttons only name their action
 * (data-action) and the transcript box handles the clicks. Each render marks the last reply
 * and the user's last message (markLast); CSS shows Retry and Edit only there, only while the
 * chat takes messages, and never in a sub-agent's read-only chat. Copy is on every reply.
 */
import { sessionPath } from "./api.js";
import { el } from "./dom.js";
import { gettext, ngettext } from "./i18n.js";
import { copyText } from "./markdown.js";

const COPIED_MS = 1500;

/** The action buttons of a bubble; ``text`` is what Copy copies (the Markdown as written). */
export function actionBar(actions, text) {
  const bar = el("div", {
    className: "ahentic-msg-actions",
    role: "group",
    "aria-label": gettext("Message actions"),
  });
  const labels = {
    copy: [gettext("Copy"), gettext("Copy the reply as Markdown")],
    retry: [gettext("Retry"), gettext("Retry: answer your last message again")],
    edit: [gettext("Edit"), gettext("Edit and resend your message")],
  };
  for (const action of actions) {
    const [label, title] = labels[action];
    bar.append(
      el("button", {
        type: "button",
        className: "ahentic-msg-action is-" + action,
        "data-action": action,
        "aria-label": title,
        title,
        text: label,
      }),
    );
  }
  bar.copyText = text;
  return bar;
}

/** ``messages`` cut into parts: {attempt: false, messages} for the current conversation and
 * {attempt: true, messages, count} for messages set aside by retries or edits
 * (``meta.supersededBy``) that follow each other, ``count`` the attempts among them (one per
 * retry or edit). */
export function withAttempts(messages) {
  const parts = [];
  for (const message of messages) {
    const attempt = !!(message.meta && message.meta.supersededBy);
    const last = parts[parts.length - 1];
    if (last && last.attempt === attempt) last.messages.push(message);
    else parts.push({ attempt, messages: [message] });
  }
  for (const part of parts) {
    if (part.attempt) part.count = new Set(part.messages.map((m) => m.meta.supersededBy)).size;
  }
  return parts;
}

/** The folded earlier attempts ("Earlier attempt", "2 earlier attempts") with their messages. */
export function attemptNode(item, nodes) {
  const label =
    item.count > 1
      ? ngettext("%(count)s earlier attempt", "%(count)s earlier attempts", item.count, {
          count: item.count,
        })
      : gettext("Earlier attempt");
  const box = el(
    "details",
    { className: "ahentic-attempt", "data-role-kind": "attempt" },
    el("summary", { text: label }),
  );
  box.append(...nodes.filter(Boolean));
  return box;
}

/** Mark the last reply and the user's last message of the transcript box (outside the folded
 * earlier attempts): where Retry and Edit show. */
export function markLast(box) {
  for (const node of box.querySelectorAll("[data-last]")) delete node.dataset.last;
  const current = Array.from(box.children).filter((node) => node.matches(".ahentic-msg"));
  const reply = current.filter((node) => node.matches(".ahentic-assistant")).pop();
  const mine = current.filter((node) => node.matches(".ahentic-user:not(.is-local)")).pop();
  if (reply && (!mine || mine.compareDocumentPosition(reply) & Node.DOCUMENT_POSITION_FOLLOWING)) {
    reply.dataset.last = "reply";
  }
  if (mine) mine.dataset.last = "mine";
}

/** Uses app.activeSession, app.isReadOnly, app.applyPayload, app.renderSession,
 * app.pollSoon, app.setError and app.runner. */
export function createReplyActions(app) {
  const { ui } = app;
  const { api } = app.client;

  async function copy(button, text) {
    try {
      await copyText(text);
      button.textContent = gettext("Copied");
    } catch (err) {
      button.textContent = gettext("Copy failed");
    }
    setTimeout(() => (button.textContent = gettext("Copy")), COPIED_MS);
  }

  function applied(s, result) {
    if (result.ok) app.applyPayload(s, result.data, result.etag);
    else app.setError(s, result.data);
    app.renderSession();
    app.pollSoon(s);
  }

  async function retry(s) {
    app.clearError();
    app.runner.claim(s.id, true); // the user is on this page: its window runs the page tools
    applied(s, await api("POST", sessionPath(s.id, "retry"), {}));
  }

  /** The user's last message (not an earlier attempt), from the shown transcript. */
  function lastOwnMessage(s) {
    const messages = s && s.payload ? s.payload.messages : [];
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i];
      if (m.kind === "user_message" && !(m.meta && m.meta.supersededBy)) return m;
    }
    return null;
  }

  function takesMessages(s) {
    const status = s && s.payload && s.payload.status;
    return ["idle", "error", "cancelled"].includes(status) && !app.isReadOnly(s) && !s.stopping;
  }

  /** Put the user's last message in the box to edit it; Send resends it (``sendEdit``). */
  function startEdit(s) {
    const message = takesMessages(s) ? lastOwnMessage(s) : null;
    if (!message) return false;
    s.editing = { seq: message.seq, draft: ui.input.value };
    ui.input.value = message.content;
    renderEditing(s);
    ui.input.focus();
    ui.input.setSelectionRange(ui.input.value.length, ui.input.value.length);
    return true;
  }

  /** Leave editing; the box gets back what it held before. */
  function cancelEdit(s) {
    if (!s || !s.editing) return;
    ui.input.value = s.editing.draft;
    s.editing = null;
    renderEditing(s);
  }

  /** Resend the edited message. */
  async function sendEdit(s, content) {
    const seq = s.editing.seq;
    app.runner.claim(s.id, true);
    const result = await api("POST", sessionPath(s.id, "messages/" + seq + "/edit"), { content });
    if (result.ok) {
      s.editing = null;
      ui.input.value = "";
    }
    applied(s, result);
  }

  /** The "Editing your last message" line above the box, with Cancel (``s``: the shown chat). */
  function renderEditing(s) {
    if (s && s.editing && !takesMessages(s)) s.editing = null; // a run started meanwhile
    const editing = !!(s && s.editing);
    let line = ui.composer.querySelector(".ahentic-editing");
    if (editing && !line) {
      line = el(
        "div",
        { className: "ahentic-editing", role: "status" },
        el("span", { text: gettext("Editing your last message: Send resends it.") }),
        el("button", {
          type: "button",
          className: "ahentic-link",
          text: gettext("Cancel"),
          "aria-label": gettext("Cancel editing"),
          onclick: () => {
            cancelEdit(app.activeSession());
            ui.input.focus();
          },
        }),
      );
      ui.composer.prepend(line);
    } else if (!editing && line) {
      line.remove();
    }
    ui.composer.classList.toggle("is-editing", editing);
  }

  function wire() {
    ui.transcript.addEventListener("click", (event) => {
      const button = event.target.closest("[data-action]");
      const s = app.activeSession();
      if (!button || !s || !ui.transcript.contains(button)) return;
      const action = button.dataset.action;
      if (action === "copy") copy(button, button.parentElement.copyText || "");
      else if (action === "retry" && takesMessages(s)) retry(s);
      else if (action === "edit") startEdit(s);
    });
    ui.input.addEventListener("keydown", (event) => {
      const s = app.activeSession();
      if (event.key === "ArrowUp" && !ui.input.value && !event.shiftKey && !event.isComposing) {
        if (startEdit(s)) event.preventDefault();
      } else if (event.key === "Escape" && s && s.editing && !event.isComposing) {
        // Leaves editing only; the panel's Escape (layout.js) waits for the next one.
        cancelEdit(s);
        event.preventDefault();
      }
    });
  }

  return { sendEdit, renderEditing, wire };
}

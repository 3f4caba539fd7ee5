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

/** Messages set aside by retries or edits (``meta.supersededBy``) that follow each other
 * become one {attempt: true, messages, count} item, ``count`` the attempts among them (one per
 * retry or edit); other messages pass through. */
export function withAttempts(messages) {
  const items = [];
  for (const message of messages) {
    const run = message.meta && message.meta.supersededBy;
    const last = items[items.length - 1];
    if (!run) items.push(message);
    else if (last && last.attempt) last.messages.push(message);
    else items.push({ attempt: true, messages: [message] });
  }
  for (const item of items) {
    if (item.attempt) item.count = new Set(item.messages.map((m) => m.meta.supersededBy)).size;
  }
  return items;
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

/**
 * The actions' behaviour. ``hooks``: session() the shown chat, readOnly(s), apply(s, result)
 * a mutating call's payload, error(s, data), render(), claim(s) (this window runs the chat's
 * browser tools).
 */
export function createReplyActions(app, hooks) {
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

  async function retry(s) {
    hooks.claim(s);
    const result = await api("POST", sessionPath(s.id, "retry"), {});
    if (result.ok) hooks.apply(s, result);
    else hooks.error(s, result.data);
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
    return !!status && ["idle", "error", "cancelled"].includes(status) && !hooks.readOnly(s);
  }

  /** Put the user's last message in the box to edit it; Send resends it (``send``). */
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

  function cancelEdit(s, keepText) {
    if (!s || !s.editing) return;
    const draft = s.editing.draft;
    s.editing = null;
    if (!keepText) ui.input.value = draft;
    renderEditing(s);
  }

  /** Send the edited message; false when the chat is not being edited (a plain send). */
  async function send(s, content) {
    if (!s || !s.editing) return false;
    const seq = s.editing.seq;
    hooks.claim(s);
    const result = await api("POST", sessionPath(s.id, "messages/" + seq + "/edit"), { content });
    if (result.ok) {
      s.editing = null;
      ui.input.value = "";
      hooks.apply(s, result);
    } else {
      hooks.error(s, result.data);
    }
    renderEditing(s);
    return true;
  }

  /** The "Editing your message" line above the box, with Cancel. */
  function renderEditing(s) {
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
            cancelEdit(hooks.session());
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

  ui.transcript.addEventListener("click", (event) => {
    const button = event.target.closest("[data-action]");
    if (!button || !ui.transcript.contains(button)) return;
    const s = hooks.session();
    if (!s) return;
    const action = button.dataset.action;
    if (action === "copy") copy(button, button.parentElement.copyText || "");
    else if (action === "retry" && takesMessages(s)) retry(s);
    else if (action === "edit") startEdit(s);
  });

  ui.input.addEventListener("keydown", (event) => {
    const s = hooks.session();
    if (event.key === "ArrowUp" && !ui.input.value && !event.shiftKey && !event.isComposing) {
      if (startEdit(s)) event.preventDefault();
    } else if (event.key === "Escape" && s && s.editing) {
      cancelEdit(s);
      event.stopPropagation();
      event.preventDefault();
    }
  });

  return { send, startEdit, cancelEdit, renderEditing, takesMessages };
}

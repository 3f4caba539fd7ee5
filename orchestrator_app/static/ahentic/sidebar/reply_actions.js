/*
 * Reply actions: Copy, Retry and Edit on the transcript's bubbles, the earlier attempts that a
 * retry leaves (folded under "Earlier attempt"), the versions of a message an edit leaves
 * ("1 of 2", as branches), and editing a message of the user's in the composer (its Edit
 * button, or Up in an empty message box for the last one).
 *
 * Bubbles are built once and reused (transcript.js), so their buttons only name their action
 * (data-action) and the transcript box handles the clicks. Each render marks the last reply
 * (markLast); CSS shows Retry only there and Edit on the user's messages of the conversation,
 * only while the chat takes messages, and never in a sub-agent's read-only chat. Copy is on
 * every reply.
 *
 * Versions: an edit sets the message and everything after it aside (meta.supersededBy) and
 * writes the new text as a new message whose meta.editOf is the seq it replaces. The
 * transcript shows the newest version with its pager; choosing an earlier one shows that
 * version's conversation as it was (read-only) in place of the current one.
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

/** The versions of each edited message of the user's: chains of ``meta.editOf`` from the
 * current message back to the first version, oldest first (only chains of two or more). */
function versionChains(messages) {
  const bySeq = new Map(messages.map((m) => [m.seq, m]));
  const chains = [];
  for (const message of messages) {
    const meta = message.meta || {};
    if (message.kind !== "user_message" || meta.supersededBy || meta.editOf == null) continue;
    const chain = [message];
    for (let at = message; at.meta && bySeq.has(at.meta.editOf); ) {
      at = bySeq.get(at.meta.editOf);
      chain.unshift(at);
    }
    if (chain.length > 1) chains.push(chain);
  }
  return chains;
}

/**
 * ``messages`` as the reader chose to see them (``chosen``: {seq of a current message: the
 * version number shown}): each earlier version's conversation, the messages from it up to the
 * next version, is left out, unless it is the chosen one: then it shows as the conversation
 * (``earlierVersion`` set, read-only) and nothing after it does. Returns {messages, pagers}:
 * pagers maps the seq of each version shown to {head, index, count}.
 */
export function withVersions(messages, chosen) {
  const pagers = new Map();
  const chains = versionChains(messages);
  if (!chains.length) return { messages, pagers };
  const hidden = new Set();
  const earlier = new Set();
  let cut = Infinity; // an earlier version shown: the current conversation from here is not
  for (const chain of chains) {
    const head = chain[chain.length - 1];
    const count = chain.length;
    const asked = (chosen || {})[head.seq];
    const index = asked >= 1 && asked <= count ? asked : count;
    for (let i = 0; i < count - 1; i++) {
      const from = chain[i].seq;
      const to = chain[i + 1].seq;
      const run = chain[i].meta.supersededBy;
      for (const m of messages) {
        if (m.seq < from || m.seq >= to) continue;
        if (i !== index - 1) hidden.add(m.seq);
        else if (m.meta && m.meta.supersededBy === run) earlier.add(m.seq);
      }
    }
    pagers.set(chain[index - 1].seq, { head: head.seq, index, count });
    if (index < count) cut = Math.min(cut, head.seq);
  }
  const shown = messages
    .filter((m) => !hidden.has(m.seq) && m.seq < cut)
    .map((m) =>
      earlier.has(m.seq)
        ? { ...m, earlierVersion: true, meta: { ...m.meta, supersededBy: undefined } }
        : m,
    );
  return { messages: shown, pagers };
}

/** "‹ 1 of 2 ›" under a message that has versions. */
export function versionPager({ head, index, count }) {
  const step = (to, label, text, which) =>
    el("button", {
      type: "button",
      className: "ahentic-version-step " + which,
      "data-action": "version",
      "data-head": head,
      "data-index": to,
      "aria-label": label,
      title: label,
      disabled: to < 1 || to > count,
      text,
    });
  return el(
    "div",
    {
      className: "ahentic-versions",
      role: "group",
      "aria-label": gettext("Versions of your message"),
      "data-role-kind": "versions",
      "data-head": head,
    },
    step(index - 1, gettext("Previous version"), "‹", "is-previous"),
    el("span", {
      className: "ahentic-version-count",
      text: gettext("%(index)s of %(count)s", { index, count }),
    }),
    step(index + 1, gettext("Next version"), "›", "is-next"),
  );
}

/** Mark the last reply of the transcript box (outside the folded earlier attempts) and the
 * user's last message: where Retry and Up's edit apply. An earlier version shown is
 * read-only: nothing is marked then. */
export function markLast(box) {
  for (const node of box.querySelectorAll("[data-last]")) delete node.dataset.last;
  if (box.querySelector(":scope > .is-earlier-version")) return;
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

  /** The user's messages of the conversation (not an earlier attempt), oldest first. */
  function ownMessages(s) {
    const messages = s && s.payload ? s.older.concat(s.payload.messages) : [];
    return messages.filter((m) => m.kind === "user_message" && !(m.meta && m.meta.supersededBy));
  }

  function takesMessages(s) {
    const status = s && s.payload && s.payload.status;
    return ["idle", "error", "cancelled"].includes(status) && !app.isReadOnly(s) && !s.stopping;
  }

  /** Put a message of the user's (``seq``; the last one when not given) in the box to edit
   * it; Send resends it (``sendEdit``). */
  function startEdit(s, seq) {
    const own = takesMessages(s) ? ownMessages(s) : [];
    const message = seq == null ? own[own.length - 1] : own.find((m) => m.seq === seq);
    if (!message) return false;
    const last = message === own[own.length - 1];
    s.editing = { seq: message.seq, last, draft: s.editing ? s.editing.draft : ui.input.value };
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
      s.versions = {}; // the new version shows
      ui.input.value = "";
    }
    applied(s, result);
  }

  /** The "Editing your message" line above the box, with Cancel (``s``: the shown chat). */
  function renderEditing(s) {
    if (s && s.editing && !takesMessages(s)) s.editing = null; // a run started meanwhile
    const editing = !!(s && s.editing);
    let line = ui.composer.querySelector(".ahentic-editing");
    const text = !editing
      ? ""
      : s.editing.last
        ? gettext("Editing your last message: Send resends it.")
        : gettext("Editing an earlier message: Send resends it; the later turns stay as its earlier version.");
    if (line && line.dataset.text !== text) {
      line.remove();
      line = null;
    }
    if (editing && !line) {
      line = el(
        "div",
        { className: "ahentic-editing", role: "status", "data-text": text },
        el("span", { text }),
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

  /** Show another version of a message (its pager's ‹ and ›); focus stays on the pager. */
  function showVersion(s, button) {
    const head = Number(button.dataset.head);
    s.versions = { ...(s.versions || {}), [head]: Number(button.dataset.index) };
    const which = button.classList.contains("is-next") ? "is-next" : "is-previous";
    app.renderSession();
    const again = ui.transcript.querySelector(
      `.ahentic-versions[data-head="${head}"] .ahentic-version-step.${which}`,
    );
    const target = again && !again.disabled ? again : ui.transcript.querySelector(
      `.ahentic-versions[data-head="${head}"] .ahentic-version-step:not([disabled])`,
    );
    if (target) target.focus();
  }

  function wire() {
    ui.transcript.addEventListener("click", (event) => {
      const button = event.target.closest("[data-action]");
      const s = app.activeSession();
      if (!button || !s || !ui.transcript.contains(button)) return;
      const action = button.dataset.action;
      if (action === "copy") copy(button, button.parentElement.copyText || "");
      else if (action === "retry" && takesMessages(s)) retry(s);
      else if (action === "edit") {
        const bubble = button.closest("[data-seq]");
        startEdit(s, bubble ? Number(bubble.dataset.seq) : null);
      } else if (action === "version") showVersion(s, button);
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

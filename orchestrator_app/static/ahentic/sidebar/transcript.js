/*
 * The transcript: one node per message, built once and reused (messages never change).
 *
 * User messages are plain text. Model text (replies, sub-agent reports) is Markdown, rendered by
 * renderMarkdown (markdown.js): a reply still being written can be rendered again into the same
 * bubble with replyBubble(...).setText(longerText). Approval decisions show as a line of their own
 * in every view mode; verbose and debug add the tool calls and results.
 */
import { isLive } from "./api.js";
import { el, fill, changed, previewJson } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { decorateReply } from "./thinking.js";

const NEAR_BOTTOM_PX = 60;

const DECISION_LABELS = {
  allow_once: "Allowed once",
  allow_session: "Allowed for this chat",
  always_allow: "Always allowed",
};
const DENY_REASONS = {
  user_denied: "",
  user_redirect: "you sent a new message instead",
};

/** The decision a tool result records, as a line of text, or null (no user decision). */
export function decisionText(meta) {
  const tool = meta.tool || "tool";
  if (meta.denied) {
    const reason = meta.reason in DENY_REASONS ? DENY_REASONS[meta.reason] : meta.reason;
    return "Denied" + (reason ? ": " + reason : "") + " (" + tool + ")";
  }
  const label = DECISION_LABELS[meta.approved];
  return label ? label + " (" + tool + ")" : null;
}

function decisionNode(message, text) {
  return el("div", {
    className: "ahentic-msg ahentic-decision" + (message.meta.denied ? " is-denied" : ""),
    "data-role-kind": "decision",
    text,
  });
}

/** A model-text bubble; setText renders Markdown again (a growing reply keeps its node). */
export function replyBubble(from, text, className) {
  const body = el("div", { className: "ahentic-msg-text" });
  const node = el(
    "div",
    { className: "ahentic-msg " + className, "data-role-kind": "assistant" },
    el("div", { className: "ahentic-msg-from", text: from }),
    body,
  );
  node.setText = (value) => renderMarkdown(body, value);
  node.setText(text);
  return node;
}

function textBubble(from, text, className, role) {
  return el(
    "div",
    { className: "ahentic-msg " + className, "data-role-kind": role },
    el("div", { className: "ahentic-msg-from", text: from }),
    el("div", { className: "ahentic-msg-text", text }),
  );
}

function toolResultNode(message) {
  const meta = message.meta;
  const failed = meta.ok === false;
  const label =
    "← " +
    (meta.tool || "tool") +
    (failed ? " failed" + (meta.error ? " (" + meta.error + ")" : "") : " ok");
  return el(
    "details",
    {
      className: "ahentic-msg ahentic-tool-result" + (failed ? " is-failed" : ""),
      "data-role-kind": "tool_response",
    },
    el("summary", { text: label }),
    el("pre", { text: message.content }),
  );
}

export function messageNode(message, viewMode) {
  const role = message.role;
  const meta = message.meta || (message.meta = {});
  if (message.kind === "tool_call") {
    return el(
      "details",
      { className: "ahentic-msg ahentic-tool-call", "data-role-kind": "tool_call" },
      el("summary", { text: "→ " + (meta.tool || "tool") }),
      el("pre", { text: previewJson(meta.input, 4000) }),
    );
  }
  if (message.kind === "tool_response") {
    const decision = decisionText(meta);
    if (viewMode === "basic") return decision ? decisionNode(message, decision) : null;
    const result = toolResultNode(message);
    if (!decision) return result;
    const group = el("div", { className: "ahentic-msg-group" }, decisionNode(message, decision));
    group.append(result);
    return group;
  }
  if (role === "event") {
    return el("div", {
      className: "ahentic-msg ahentic-event",
      "data-role-kind": "event",
      text: message.content,
    });
  }
  if (meta.source === "subagent") {
    return replyBubble("Sub-agent " + (meta.name || ""), message.content, "ahentic-subagent");
  }
  if (role === "user") return textBubble("You", message.content, "ahentic-user", "user");
  const reply = replyBubble(
    "Agent",
    message.content,
    "ahentic-assistant" + (meta.error ? " is-error" : ""),
  );
  return decorateReply(reply, message, viewMode);
}

function localMessageNode(local) {
  const node = textBubble("You", local.content, "ahentic-user is-local", "user");
  node.dataset.localId = local.localId;
  return node;
}

/** Messages never change once written, so each node is built once and reused. */
function cachedNode(s, key, build) {
  if (!s.nodes.has(key)) s.nodes.set(key, build());
  return s.nodes.get(key);
}

/**
 * Keep the newest message in view while the reader is at the bottom, also when the transcript
 * shrinks because a banner or a card appeared above or below it.
 */
export function keepPinned(box) {
  const isNearBottom = () => box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_BOTTOM_PX;
  box.dataset.pinned = "1";
  box.addEventListener("scroll", () => {
    box.dataset.pinned = isNearBottom() ? "1" : "";
  });
  if (typeof ResizeObserver === "function") {
    new ResizeObserver(() => {
      if (box.dataset.pinned) box.scrollTop = box.scrollHeight;
    }).observe(box);
  }
}

export function renderTranscript(app, s, options) {
  const box = app.ui.transcript;
  const p = s && s.payload;
  const messages = p ? s.older.concat(p.messages) : [];
  const locals = s ? s.localMessages : [];
  const moreAvailable = !!s && !!(s.older.length ? s.olderHasMore : p && p.hasMore);
  box.setAttribute("aria-busy", String(isLive(p)));
  // The reply being streamed keeps its node while it grows (Markdown rendered each time).
  const liveText = s && s.live && s.live.text ? s.live.text : "";
  if (liveText) {
    if (!s.liveNode) s.liveNode = replyBubble("Agent", "", "ahentic-assistant ahentic-live");
    s.liveNode.setText(liveText);
  } else if (s) {
    s.liveNode = null;
  }
  const key = [
    s ? s.id : "",
    p ? p.viewMode : "",
    moreAvailable,
    messages.map((m) => m.id).join(","),
    locals.map((m) => m.localId).join(","),
    liveText ? "live" : "",
  ].join("|");
  // Rebuild only on change: a rebuild every poll would drop the reader's text selection.
  if (!changed(box, key)) return;
  const switched = box.dataset.session !== (s ? s.id : "");
  box.dataset.session = s ? s.id : "";
  const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_BOTTOM_PX;
  const previousHeight = box.scrollHeight;
  const nodes = [];
  if (moreAvailable) {
    nodes.push(
      el("button", {
        type: "button",
        className: "ahentic-link ahentic-earlier",
        text: "Load earlier messages",
        onclick: () => app.loadEarlier(s),
      }),
    );
  }
  for (const message of messages) {
    nodes.push(cachedNode(s, p.viewMode + ":" + message.id, () => messageNode(message, p.viewMode)));
  }
  for (const local of locals) {
    nodes.push(cachedNode(s, local.localId, () => localMessageNode(local)));
  }
  if (liveText) nodes.push(s.liveNode);
  const shown = nodes.filter(Boolean);
  fill(box, shown.length ? shown : app.ui.empty);
  if (options && options.keepScroll) box.scrollTop += box.scrollHeight - previousHeight;
  else if (switched || nearBottom || locals.length) {
    box.scrollTop = box.scrollHeight;
    box.dataset.pinned = "1";
  }
}

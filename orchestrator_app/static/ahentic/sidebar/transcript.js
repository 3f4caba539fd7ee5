/*
 * The transcript: one node per message, built once and reused (messages never change).
 *
 * User messages are plain text. Model text (replies, sub-agent reports) is Markdown, rendered by
 * renderMarkdown (markdown.js): a reply still being written can be rendered again into the same
 * bubble with replyBubble(...).setText(longerText). Approval decisions show as a line of their own
 * in every view mode; verbose and debug add the tool calls and results.
 */
import { isLive } from "./api.js";
import { attachmentsNode } from "./attachments.js";
import { el, fill, changed, previewJson } from "./dom.js";
import { gettext } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import {
  actionBar,
  attemptNode,
  markLast,
  versionPager,
  withAttempts,
  withVersions,
} from "./reply_actions.js";
import { decorateReply, thinkingNode } from "./thinking.js";

const NEAR_BOTTOM_PX = 60;

const DECISION_LABELS = {
  allow_once: gettext("Allowed once"),
  allow_session: gettext("Allowed for this chat"),
  always_allow: gettext("Always allowed"),
};
const DENY_REASONS = {
  user_denied: "",
  user_redirect: gettext("you sent a new message instead"),
};

/**
 * The decision a tool result records, as a line of text, or null (no user decision). The Basic
 * view says only the decision ("Allowed once", "Denied: reason"); Verbose and Debug name the
 * tool after it, by its registry name.
 */
export function decisionText(meta, viewMode) {
  const basic = !viewMode || viewMode === "basic";
  const tool = meta.tool || gettext("tool");
  if (meta.unchanged) {
    return basic
      ? gettext("Nothing to change, so nothing to approve")
      : gettext("Nothing to change (%(tool)s)", { tool });
  }
  if (meta.denied) {
    const reason = meta.reason in DENY_REASONS ? DENY_REASONS[meta.reason] : meta.reason;
    if (basic) return reason ? gettext("Denied: %(reason)s", { reason }) : gettext("Denied");
    return reason
      ? gettext("Denied: %(reason)s (%(tool)s)", { reason, tool })
      : gettext("Denied (%(tool)s)", { tool });
  }
  const decided = DECISION_LABELS[meta.approved];
  if (!decided && meta.ok === false && meta.failure) {
    const failed = gettext("“%(label)s” failed: %(reason)s", {
      label: meta.label || tool,
      reason: meta.failure,
    });
    return basic ? failed : failed + " (" + tool + ")";
  }
  if (!decided) return null;
  // An allowed call that then failed says why, in every view mode (a save the form refused).
  const label =
    meta.ok === false
      ? meta.failure
        ? gettext("%(decision)s, but it failed: %(reason)s", { decision: decided, reason: meta.failure })
        : gettext("%(decision)s, but it failed", { decision: decided })
      : decided;
  return basic ? label : label + " (" + tool + ")";
}

function decisionNode(message, text) {
  return el("div", {
    className:
      "ahentic-msg ahentic-decision" +
      (message.meta.denied || message.meta.ok === false ? " is-denied" : "") +
      (message.meta.unchanged ? " is-unchanged" : ""),
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
  const tool = meta.tool || gettext("tool");
  const outcome = !failed
    ? gettext("%(tool)s ok", { tool })
    : meta.error
      ? gettext("%(tool)s failed (%(error)s)", { tool, error: meta.error })
      : gettext("%(tool)s failed", { tool });
  const label = "← " + outcome;
  return el(
    "details",
    {
      className: "ahentic-msg ahentic-tool-result" + (failed ? " is-failed" : ""),
      "data-role-kind": "tool_response",
    },
    el("summary", { text: label }),
    el("pre", { text: message.content }),
    attachmentsNode(meta.attachments),
  );
}

export function messageNode(message, viewMode) {
  const role = message.role;
  const meta = message.meta || (message.meta = {});
  if (message.kind === "tool_call") {
    return el(
      "details",
      { className: "ahentic-msg ahentic-tool-call", "data-role-kind": "tool_call" },
      el("summary", { text: "→ " + (meta.tool || gettext("tool")) }),
      el("pre", { text: previewJson(meta.input, 4000) }),
    );
  }
  if (message.kind === "tool_response") {
    const decision = decisionText(meta, viewMode);
    // A tool's images show in every view mode; the rest of its result is tool traffic.
    const images = viewMode === "basic" ? attachmentsNode(meta.attachments) : null;
    if (images) images.dataset.roleKind = "tool_images";
    if (viewMode === "basic" && decision && images) {
      return el("div", { className: "ahentic-msg-group" }, decisionNode(message, decision), images);
    }
    if (viewMode === "basic") return decision ? decisionNode(message, decision) : images;
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
    const from = gettext("Sub-agent %(name)s", { name: meta.name || "" }).trim();
    return replyBubble(from, message.content, "ahentic-subagent");
  }
  if (role === "user") {
    const bubble = textBubble(gettext("You"), message.content, "ahentic-user", "user");
    const attached = attachmentsNode(meta.attachments);
    if (attached) bubble.append(attached);
    // Edit on the user's messages of the conversation (an earlier version is read-only).
    if (message.kind === "user_message" && !meta.supersededBy && !message.earlierVersion) {
      bubble.dataset.seq = message.seq;
      bubble.append(actionBar(["edit"], message.content));
    }
    return bubble;
  }
  return agentBubble([message], viewMode);
}

/** A plain reply of the agent (not an error, not a sub-agent's report, not a tool call). */
function isAgentText(message) {
  const meta = message.meta || {};
  return message.kind === "agent_message" && !meta.error && meta.source !== "subagent";
}

/** One bubble for consecutive replies of the agent: a turn's texts around hidden tool calls
 * read as one answer. A reply Stop cut short says so. */
function agentBubble(messages, viewMode) {
  const stopped = messages.some((m) => m.meta && m.meta.stopped);
  const error = messages.some((m) => m.meta && m.meta.error);
  const node = replyBubble(
    gettext("Agent"),
    messages[0].content,
    "ahentic-assistant" + (error ? " is-error" : "") + (stopped ? " is-stopped" : ""),
  );
  const body = node.querySelector(".ahentic-msg-text");
  if (messages.length > 1) {
    // Each part is its own Markdown document, in the one bubble, with its own sources
    // (thinking.js); their thinking is one fold.
    body.replaceChildren();
    for (const message of messages) {
      const part = el("div", { className: "ahentic-msg-part" });
      renderMarkdown(part, message.content);
      body.append(part);
      decorateReply(node, message, viewMode, part, false);
    }
    // One "Thought for N s" for the whole reply, above its text.
    const thought = thinkingNode(messages.map((m) => m.meta), viewMode);
    if (thought) body.before(thought);
  } else {
    decorateReply(node, messages[0], viewMode);
  }
  if (stopped) node.append(el("div", { className: "ahentic-msg-note", text: gettext("Stopped") }));
  // Copy takes the reply's Markdown as the model wrote it (all parts of the turn).
  node.append(actionBar(["copy", "retry"], messages.map((m) => m.content).join("\n\n")));
  return node;
}

/** Messages to draw: consecutive agent texts become one group (an array). */
function grouped(messages) {
  const items = [];
  for (const message of messages) {
    const last = items[items.length - 1];
    if (isAgentText(message) && Array.isArray(last)) last.push(message);
    else items.push(isAgentText(message) ? [message] : message);
  }
  return items;
}

function localMessageNode(local) {
  const node = textBubble(gettext("You"), local.content, "ahentic-user is-local", "user");
  node.dataset.localId = local.localId;
  const attached = attachmentsNode(local.attachments);
  if (attached) node.append(attached);
  return node;
}

/** An earlier version's messages are drawn apart from the same messages folded as an
 * earlier attempt, marked read-only. */
function marked(node, messages) {
  if (node && messages.some((m) => m.earlierVersion)) node.classList.add("is-earlier-version");
  return node;
}

/** The nodes of ``messages`` (consecutive agent texts as one bubble), built once each, and the
 * version pager after a message that has versions; ``prefix`` keeps an earlier attempt's
 * nodes apart from the current ones. */
function messageNodes(s, messages, viewMode, prefix, pagers) {
  return grouped(messages).flatMap((item) => {
    const group = Array.isArray(item) ? item : [item];
    const version = group.some((m) => m.earlierVersion) ? "version:" : "";
    const key = prefix + version + viewMode + ":" + group.map((m) => m.id).join("+");
    const node = cachedNode(s, key, () =>
      marked(Array.isArray(item) ? agentBubble(item, viewMode) : messageNode(item, viewMode), group),
    );
    const pager = pagers && !Array.isArray(item) ? pagers.get(item.seq) : null;
    if (!pager) return [node];
    const pagerKey = "pager:" + item.seq + ":" + pager.index + "/" + pager.count;
    return [node, cachedNode(s, pagerKey, () => marked(versionPager(pager), group))];
  });
}

/** ``messages`` (earlier attempts) cut where the attempt they belong to changes. */
function byAttempt(messages) {
  const runs = [];
  for (const message of messages) {
    const last = runs[runs.length - 1];
    if (last && last[0].meta.supersededBy === message.meta.supersededBy) last.push(message);
    else runs.push([message]);
  }
  return runs;
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

/**
 * An approval card appeared (below the transcript, which it made shorter): scroll so that the
 * user's last request, the agent's lead-in after it and the end of the transcript show, or,
 * when they do not all fit, the request at the top and as much of the lead-in as fits. Only
 * then: otherwise the reader's own scroll position is kept (keepPinned).
 */
export function revealRequest(box) {
  // After the card's layout (and keepPinned's own resize handling) in this frame.
  requestAnimationFrame(() =>
    requestAnimationFrame(() => {
      const requests = box.querySelectorAll(":scope > .ahentic-user");
      const request = requests[requests.length - 1];
      const bottom = box.scrollHeight - box.clientHeight;
      if (!request) {
        box.scrollTop = bottom;
        return;
      }
      const offset = request.getBoundingClientRect().top - box.getBoundingClientRect().top;
      const top = box.scrollTop + offset;
      const target = Math.min(bottom, Math.max(0, top - 4));
      box.scrollTop = target;
      box.dataset.pinned = target >= bottom - 1 ? "1" : "";
    }),
  );
}

export function renderTranscript(app, s, options) {
  const box = app.ui.transcript;
  const p = s && s.payload;
  // An edited message shows one version at a time (reply_actions.js, withVersions).
  const versions = withVersions(p ? s.older.concat(p.messages) : [], s && s.versions);
  const messages = versions.messages;
  const locals = s ? s.localMessages : [];
  const moreAvailable = !!s && !!(s.older.length ? s.olderHasMore : p && p.hasMore);
  box.setAttribute("aria-busy", String(isLive(p)));
  // Retry and Edit show while the chat takes messages, never in a sub-agent's chat (CSS).
  const takes = !!p && ["idle", "error", "cancelled"].includes(p.status) && !p.parentId;
  box.classList.toggle("takes-messages", takes && !s.stopping);
  // The reply being streamed keeps its node while it grows (Markdown rendered each time).
  const liveText = s && s.live && s.live.text ? s.live.text : "";
  if (liveText) {
    if (!s.liveNode) s.liveNode = replyBubble(gettext("Agent"), "", "ahentic-assistant ahentic-live");
    s.liveNode.setText(liveText);
  } else if (s) {
    s.liveNode = null;
  }
  const key = [
    s ? s.id : "",
    p ? p.viewMode : "",
    moreAvailable,
    // A retry or an edit sets messages aside: their node moves into an earlier attempt.
    messages.map((m) => m.id + (m.meta && m.meta.supersededBy ? "~" + m.meta.supersededBy : "")),
    [...versions.pagers.values()].map((v) => v.head + "@" + v.index + "/" + v.count),
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
        text: gettext("Load earlier messages"),
        onclick: () => app.loadEarlier(s),
      }),
    );
  }
  for (const item of withAttempts(messages)) {
    if (item.attempt) {
      const key = p.viewMode + ":attempt:" + item.messages.map((m) => m.id).join("+");
      nodes.push(
        cachedNode(s, key, () =>
          attemptNode(
            item,
            // One attempt's replies read as one bubble, never two attempts' replies.
            byAttempt(item.messages).flatMap((run) =>
              messageNodes(s, run, p.viewMode, "attempt:"),
            ),
          ),
        ),
      );
    } else {
      nodes.push(...messageNodes(s, item.messages, p.viewMode, "", versions.pagers));
    }
  }
  for (const local of locals) {
    nodes.push(cachedNode(s, local.localId, () => localMessageNode(local)));
  }
  if (liveText) nodes.push(s.liveNode);
  const shown = nodes.filter(Boolean);
  fill(box, shown.length ? shown : app.ui.empty);
  markLast(box);
  if (options && options.keepScroll) box.scrollTop += box.scrollHeight - previousHeight;
  else if (switched || nearBottom || locals.length) {
    box.scrollTop = box.scrollHeight;
    box.dataset.pinned = "1";
  }
}

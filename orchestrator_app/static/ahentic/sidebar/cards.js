/*
 * The cards around the transcript: the banner (stuck run, budget pause, resumable job, error),
 * the plan, the approval card, queued messages, artifacts with their preview, and sub-agents.
 * Each render function rebuilds its region only when what it shows changed (see changed()).
 */
import { isLive, sessionPath } from "./api.js";
import { button, changed, el, fill, formatBytes, formatTokens, previewJson, shortened, show } from "./dom.js";
import { gettext, ngettext } from "./i18n.js";
import { copyText, renderInlineMarkdown, renderMarkdown } from "./markdown.js";
import { revealRequest } from "./transcript.js";

const TOKEN_BUDGET_CODE = "ahentic_session_token_budget";
const SUMMARY_LIMIT = 180;

export const STATUS_TEXT = {
  idle: gettext("idle"),
  running: gettext("running"),
  awaiting_human: gettext("waiting for approval"),
  awaiting_browser: gettext("running a page tool"),
  error: gettext("failed"),
  cancelled: gettext("stopped"),
};

// ------------------------------------------------------------------ banner

/** What the banner says, or null: stuck run, soft-budget pause, resumable job, error. */
function bannerState(app, s) {
  const p = s && s.payload;
  if (!p || s.stopping) return null;
  const resumable = (p.status === "idle" || p.status === "error") && p.jobResumable;
  const quiet = p.status === "running" ? app.client.ageMs(p.heartbeatAt || p.modifiedAt) : null;
  if (quiet != null && p.claimed === false && quiet >= app.config.unclaimedMs) {
    // The step waits in the queue and no worker took it: say so long before "may be stuck".
    const text = gettext(
      "No worker has picked up this run. Is a worker running? Start one with " +
        "python manage.py qcluster: the run starts as soon as a worker is up.",
    );
    return { kind: "no-worker", text, stop: true };
  }
  if (quiet != null && quiet >= app.config.stuckMs) {
    const text = gettext(
      "This run may be stuck: no worker has reported progress for over %(seconds)s s. " +
        "Check that a worker is running (python manage.py qcluster), then press Continue.",
      { seconds: Math.round(app.config.stuckMs / 1000) },
    );
    return { kind: "stuck", text, continue: true, stop: true };
  }
  if (resumable && p.lastErrorCode === TOKEN_BUDGET_CODE) {
    const text = gettext("This chat is using a lot of tokens (%(tokens)s). Continue?", {
      tokens: formatTokens(p.tokensUsed),
    });
    return { kind: "budget", text, continue: true, stop: true };
  }
  if (resumable) {
    const text = gettext("This job can be continued.") + (p.lastError ? " " + p.lastError : "");
    return { kind: "resumable", text, continue: true };
  }
  if (p.status === "error" && p.lastError) return { kind: "error", text: p.lastError };
  return null;
}

/** Whether the run waits for a worker that never took it (the "no-worker" banner shows). */
export function waitsForWorker(app, s) {
  const state = bannerState(app, s);
  return Boolean(state && state.kind === "no-worker");
}

export function renderBanner(app, s) {
  const { ui } = app;
  const banner = bannerState(app, s);
  if (!changed(ui.banner, banner ? s.id + "|" + banner.kind + "|" + banner.text : "")) return;
  ui.banner.dataset.kind = banner ? banner.kind : "";
  fill(
    ui.banner,
    ...(banner
      ? [
          el("span", { className: "ahentic-banner-text", text: banner.text }),
          banner.continue
            ? button(gettext("Continue"), () => app.continueRun(s), "ahentic-button ahentic-primary")
            : null,
          banner.stop ? button(gettext("Stop"), app.stop) : null,
        ]
      : []),
  );
  show(ui.banner, !!banner);
}

// ------------------------------------------------------------------ plan

const STEP_MARKS = { completed: "✓", in_progress: "▸", pending: "○", cancelled: "✕" };
const STEP_STATUS_TEXT = {
  completed: gettext("completed"),
  in_progress: gettext("in progress"),
  pending: gettext("pending"),
  cancelled: gettext("cancelled"),
};

export function renderPlan(app, s) {
  const { ui } = app;
  const plan = s && s.payload && s.payload.plan;
  if (!changed(ui.plan, JSON.stringify(plan || null))) return;
  if (!plan || !plan.steps || !plan.steps.length) {
    show(ui.plan, false);
    fill(ui.plan);
    return;
  }
  fill(
    ui.plan,
    el("div", { className: "ahentic-card-title", text: plan.title || gettext("Plan") }),
    el(
      "ol",
      { className: "ahentic-plan-steps" },
      plan.steps.map((step) => {
        const content = el("span");
        renderInlineMarkdown(content, step.content);
        return el(
          "li",
          { className: "ahentic-step is-" + step.status, "data-status": step.status },
          el("span", {
            className: "ahentic-step-mark",
            "aria-hidden": "true",
            text: STEP_MARKS[step.status] || "•",
          }),
          content,
          el("span", {
            className: "ahentic-visually-hidden",
            text: " (" + (STEP_STATUS_TEXT[step.status] || String(step.status).replace("_", " ")) + ")",
          }),
        );
      }),
    ),
  );
  show(ui.plan, true);
}

// ------------------------------------------------------------------ approval card

/** The summary's headline: with a diff below it, the summary's own "field a → b" list (the
 * text after "Update …: ") would say the same twice. */
function hitlHeadline(pendingTool, changes) {
  const summary = pendingTool.summary || pendingTool.name;
  if (!changes.length) return summary;
  const cut = summary.indexOf(": " + changes[0].field + " ");
  return cut > 0 ? summary.slice(0, cut) : summary;
}

/** The fields the call changes: before (struck) and after, one row each; each field by the
 * name people read (its verbose_name), the field's own name in its tooltip. */
function diffTable(changes) {
  return el(
    "dl",
    { className: "ahentic-hitl-diff", "aria-label": gettext("Changes") },
    changes.flatMap((change) => [
      el("dt", { text: change.label || change.field, title: change.field }),
      el(
        "dd",
        {},
        change.hidden
          ? el("span", { className: "ahentic-diff-hidden", text: gettext("changed (you cannot see this field)") })
          : [
              change.before == null
                ? null
                : el("del", { className: "ahentic-diff-before", text: change.before }),
              change.before == null ? null : el("span", { className: "ahentic-diff-arrow", "aria-label": gettext("becomes"), text: " → " }),
              el("ins", { className: "ahentic-diff-after", text: change.after == null ? "" : change.after }),
            ],
      ),
    ]),
  );
}

/** The staged text an approval would use: a sentence in the Basic view, the pointer's fields
 * (key, kind, size, excerpt) in Verbose and Debug. */
function memoryLine(memory, basic) {
  const text = basic
    ? gettext("Uses the draft “%(title)s” (%(size)s)", {
        title: memory.title || memory.key,
        size: formatBytes(memory.bytes),
      })
    : gettext("Artifact: %(details)s", {
        details: [memory.title || memory.key, memory.kind, formatBytes(memory.bytes), memory.excerpt]
          .filter(Boolean)
          .join(" · "),
      });
  return el("div", { className: "ahentic-hitl-memory", text });
}

export function renderHitl(app, s) {
  const { ui } = app;
  const p = s && s.payload;
  const pendingTool = p && p.pendingTool;
  const waiting = p && !s.stopping && p.status === "awaiting_human" && pendingTool;
  if (!waiting) {
    changed(ui.hitl, "");
    show(ui.hitl, false);
    fill(ui.hitl);
    return;
  }
  const busy = s.approving === pendingTool.callId;
  const basic = p.viewMode === "basic";
  if (!changed(ui.hitl, s.id + ":" + pendingTool.callId + ":" + p.viewMode)) {
    // Same call: keep the card (and a reason being typed); only toggle the buttons.
    ui.hitl.querySelectorAll(".ahentic-hitl-buttons button").forEach((b) => (b.disabled = busy));
    show(ui.hitl, true);
    return;
  }
  const reason = el("input", {
    type: "text",
    className: "ahentic-input",
    "data-role-hitl": "reason",
    placeholder: gettext("Reason (optional, sent with Deny)"),
    "aria-label": gettext("Reason for denying"),
    maxlength: "2000",
  });
  const memory = pendingTool.memory;
  const changes = Array.isArray(pendingTool.changes) ? pendingTool.changes : [];
  const toolLabel = pendingTool.label || pendingTool.name;
  const primary = "ahentic-button ahentic-primary";
  const buttons = [
    button(gettext("Allow once"), () => app.decide(s, "allow_once"), primary),
    pendingTool.nonPreallowable
      ? null
      : button(gettext("Allow for this chat"), () => app.decide(s, "allow_session")),
    pendingTool.nonPreallowable
      ? null
      : button(gettext("Always allow"), () => app.decide(s, "always_allow")),
    button(gettext("Deny"), () => app.decide(s, "deny", reason.value.trim())),
  ].filter(Boolean);
  buttons.forEach((b) => {
    b.setAttribute(
      "aria-label",
      gettext("%(action)s: %(tool)s", { action: b.textContent, tool: toolLabel }),
    );
    b.disabled = busy;
  });
  fill(
    ui.hitl,
    el(
      "div",
      { className: "ahentic-card-title" },
      gettext("Approval needed"),
      el("span", { className: "ahentic-hitl-tool", "data-role-hitl": "tool", text: toolLabel }),
    ),
    el(
      "div",
      { className: "ahentic-hitl-summary" },
      shortened(hitlHeadline(pendingTool, changes), SUMMARY_LIMIT, {
        render: renderInlineMarkdown,
      }),
    ),
    changes.length ? diffTable(changes) : null,
    memory ? memoryLine(memory, basic) : null,
    basic
      ? null
      : el(
          // Verbose and Debug: the raw call, folded (the summary and the diff say what it does).
          "details",
          { className: "ahentic-hitl-input" },
          el(
            "summary",
            {},
            gettext("Details:") + " ",
            el("code", { text: pendingTool.name }),
            " " + gettext("input (JSON)"),
          ),
          el("pre", { text: previewJson(pendingTool.input, 2000) }),
        ),
    el("div", { className: "ahentic-hitl-actions" }, reason, el("div", { className: "ahentic-hitl-buttons" }, buttons)),
  );
  show(ui.hitl, true);
  revealRequest(ui.transcript); // the request and the lead-in stay in view above the card
}

// ------------------------------------------------------------------ queued messages

export function renderPending(app, s) {
  const { ui } = app;
  const p = s && s.payload;
  const items = p ? p.pendingMessages.filter((m) => !s.recalled.has(m.id)) : [];
  // While a run is live the queue drains by itself; after Stop (or a failure) it waits.
  const waiting = !!p && !isLive(p) && !s.stopping;
  if (!changed(ui.pending, (s ? s.id : "") + waiting + JSON.stringify(items))) return;
  if (!items.length) {
    show(ui.pending, false);
    fill(ui.pending);
    return;
  }
  const title = waiting ? gettext("Not sent yet") : gettext("Queued until the agent is free");
  const note = waiting
    ? ngettext(
        "The run stopped before this message was sent. It goes with your next message, or send now.",
        "The run stopped before these messages were sent. They go with your next message, or send now.",
        items.length,
      )
    : null;
  fill(
    ui.pending,
    el("div", { className: "ahentic-card-title", text: title }),
    note ? el("p", { className: "ahentic-pending-note", text: note }) : null,
    el(
      "ul",
      {},
      items.map((item) => {
        const short = item.content.slice(0, 60);
        const mine = item.sourceType === "user";
        return el(
          "li",
          { className: "ahentic-pending-item", "data-pending-id": item.id },
          el("span", {
            className: "ahentic-pending-text",
            title: item.content,
            text: (mine ? "" : gettext("[sub-agent]") + " ") + item.content,
          }),
          mine && waiting
            ? el("button", {
                type: "button",
                className: "ahentic-link",
                text: gettext("Send now"),
                "aria-label": gettext("Send now: %(message)s", { message: short }),
                onclick: () => app.sendNow(s, item),
              })
            : null,
          mine
            ? el("button", {
                type: "button",
                className: "ahentic-link",
                text: gettext("Recall"),
                "aria-label": gettext("Recall queued message: %(message)s", { message: short }),
                onclick: () => app.recall(s, item.id),
              })
            : null,
        );
      }),
    ),
  );
  show(ui.pending, true);
}

// ------------------------------------------------------------------ artifacts

// The file a Download saves, by the artifact's kind.
const DOWNLOAD_TYPES = {
  html: ["text/html", ".html"],
  markdown: ["text/markdown", ".md"],
};

// The frame's own page: the sidebar's stylesheet does not reach into it.
const FRAME_STYLE =
  "body{font:14px/1.5 system-ui,sans-serif;margin:8px;color:#1f2328;background:#fff;" +
  "overflow-wrap:anywhere}img{max-width:100%}pre{white-space:pre-wrap}" +
  "table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:2px 6px}";

/** True when the artifact is text (its payload's content), not structured data. */
function isText(artifact) {
  return !!artifact.payload && typeof artifact.payload.content === "string";
}

/** The artifact's text: its content as written, or its payload as JSON. */
function artifactText(artifact) {
  const payload = artifact.payload;
  if (payload && typeof payload.content === "string") return payload.content;
  return previewJson(payload, 100000);
}

/** The page a sandboxed frame shows: HTML as written, Markdown rendered (and sanitized), or
 * null when the kind has no rendered form. */
function framePage(artifact) {
  const payload = artifact.payload;
  if (!payload || typeof payload.content !== "string") return null;
  if (artifact.kind === "html") return payload.content;
  if (artifact.kind !== "markdown") return null;
  const rendered = el("div");
  renderMarkdown(rendered, payload.content);
  rendered.querySelectorAll(".ahentic-copy").forEach((button) => button.remove());
  return "<!doctype html><meta charset=utf-8><style>" + FRAME_STYLE + "</style>" + rendered.innerHTML;
}

/**
 * Fill `body` with an artifact: HTML and Markdown rendered in a frame with sandbox="" (no
 * scripts, no forms, no popups, an origin of its own: the page it shows cannot reach this one),
 * the source one click away; other kinds as source text only. Copy takes the source; Download
 * saves it as a file named after the artifact's key.
 */
function artifactPreview(body, artifact) {
  const text = artifactText(artifact);
  const page = framePage(artifact);
  const source = el("pre", { className: "ahentic-artifact-source", tabindex: "0", text });
  const frame = page == null ? null : el("iframe", {
    className: "ahentic-artifact-frame",
    sandbox: "",
    referrerpolicy: "no-referrer",
    title: gettext("Preview of %(key)s", { key: artifact.key }),
  });
  if (frame) frame.srcdoc = page;
  const views = el("div", { className: "ahentic-artifact-view" }, frame || source);
  const toggle = frame
    ? el("button", {
        type: "button",
        className: "ahentic-link ahentic-artifact-toggle",
        "aria-pressed": "false",
        text: gettext("Show source"),
      })
    : null;
  if (toggle) {
    toggle.addEventListener("click", () => {
      const showing = toggle.getAttribute("aria-pressed") !== "true";
      toggle.setAttribute("aria-pressed", String(showing));
      toggle.textContent = showing ? gettext("Show preview") : gettext("Show source");
      fill(views, showing ? source : frame);
    });
  }
  const copy = el("button", {
    type: "button",
    className: "ahentic-link",
    "aria-label": gettext("Copy the artifact's source"),
    text: gettext("Copy"),
  });
  copy.addEventListener("click", async () => {
    try {
      await copyText(text);
      copy.textContent = gettext("Copied");
    } catch (err) {
      copy.textContent = gettext("Copy failed");
    }
    setTimeout(() => (copy.textContent = gettext("Copy")), 1500);
  });
  const [type, extension] = DOWNLOAD_TYPES[artifact.kind] ||
    (isText(artifact) ? ["text/plain", ".txt"] : ["application/json", ".json"]);
  const download = el("button", {
    type: "button",
    className: "ahentic-link",
    "aria-label": gettext("Download the artifact"),
    text: gettext("Download"),
  });
  download.addEventListener("click", () => {
    const url = URL.createObjectURL(new Blob([text], { type: type + ";charset=utf-8" }));
    const link = el("a", { href: url, download: artifact.key + extension, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
  fill(body, el("div", { className: "ahentic-artifact-tools" }, toggle, copy, download), views);
}

async function openArtifact(app, s, key) {
  const { ui } = app;
  const box = ui.artifactPreview;
  // Focus goes back where it was when the preview closes (its Open button, usually).
  if (!box.contains(document.activeElement)) box.returnFocus = document.activeElement;
  s.previewKey = key;
  const body = el("div", { className: "ahentic-artifact-body", text: gettext("Loading…") });
  const closeButton = el("button", {
    type: "button",
    className: "ahentic-icon-button",
    "aria-label": gettext("Close the preview"),
    text: "×",
    onclick: () => closeArtifact(app, s),
  });
  const heading = el("div", { className: "ahentic-card-title" }, el("code", { text: key }));
  fill(box, el("div", { className: "ahentic-artifact-head" }, heading, closeButton), body);
  box.dataset.key = key;
  show(box, true);
  closeButton.focus();
  const result = await app.client.api("GET", sessionPath(s.id, "artifacts/" + encodeURIComponent(key)));
  if (s.previewKey !== key || box.dataset.key !== key) return; // closed or replaced meanwhile
  if (!result.ok) {
    body.textContent = (result.data && result.data.detail) || gettext("The artifact could not be loaded.");
    return;
  }
  const artifact = result.data;
  if (artifact.title) heading.append(" ", el("span", { text: artifact.title }));
  heading.append(el("span", { className: "ahentic-artifact-meta", text: " · " + artifact.kind }));
  artifactPreview(body, artifact);
}

export function closeArtifact(app, s) {
  if (s) s.previewKey = null;
  const box = app.ui.artifactPreview;
  if (box.hidden) return false;
  delete box.dataset.key;
  const back = box.returnFocus;
  box.returnFocus = null;
  const focusWasInside = box.contains(document.activeElement);
  show(box, false);
  fill(box);
  if (focusWasInside && back && back.isConnected && back.getClientRects().length) back.focus();
  return true;
}

/** An artifact as a sentence (the Basic view): what the agent did with it, and its size. */
function artifactSentence(a) {
  const named = {
    title: a.title || a.key,
    size:
      a.kind === "blocks" && a.blockCount
        ? ngettext("%(count)s block", "%(count)s blocks", a.blockCount, { count: a.blockCount })
        : formatBytes(a.bytes),
  };
  if (a.status === "drafting") return gettext("Drafting “%(title)s” (%(size)s so far)", named);
  if (a.status === "applied") return gettext("Used “%(title)s” (%(size)s)", named);
  if (a.status === "stale") return gettext("Out of date: “%(title)s” (%(size)s)", named);
  if (a.status === "empty") return gettext("“%(title)s” is empty", named);
  return gettext("Drafted “%(title)s” (%(size)s)", named);
}

export function renderArtifacts(app, s) {
  const { ui } = app;
  const artifacts = (s && s.payload && s.payload.artifacts) || [];
  const basic = !s || !s.payload || s.payload.viewMode === "basic";
  if (!changed(ui.artifacts, (s ? s.id : "") + basic + JSON.stringify(artifacts))) return;
  if (!s || ui.artifactPreview.dataset.key !== s.previewKey) closeArtifact(app, null);
  ui.artifactCount.textContent = String(artifacts.length);
  fill(
    ui.artifacts,
    ...artifacts.map((a) =>
      el(
        "li",
        { className: "ahentic-artifact", "data-status": a.status, "data-key": a.key },
        ...(basic
          ? [el("span", { className: "ahentic-artifact-line", text: artifactSentence(a) })]
          : [
              el("code", { text: a.key }),
              " ",
              el("span", {
                className: "ahentic-artifact-meta",
                text: [a.kind, a.status, formatBytes(a.bytes)].join(" · "),
              }),
            ]),
        " ",
        el("button", {
          type: "button",
          className: "ahentic-link",
          text: gettext("Open"),
          "aria-label": gettext("Open artifact %(key)s", { key: a.key }),
          onclick: () => openArtifact(app, s, a.key),
        }),
        a.title && !basic ? el("div", { className: "ahentic-artifact-title", text: a.title }) : null,
      ),
    ),
  );
  show(ui.artifactsBox, artifacts.length > 0);
}

// ------------------------------------------------------------------ sub-agents

export function renderChildren(app, s) {
  const { ui } = app;
  const p = s && s.payload;
  const children = (p && p.children) || [];
  if (!changed(ui.children, (s ? s.id : "") + JSON.stringify(children))) return;
  ui.childCount.textContent = String(children.length);
  fill(
    ui.children,
    ...children.map((child) =>
      el(
        "li",
        { className: "ahentic-child", "data-status": child.status, "data-session": child.id },
        el("span", { className: "ahentic-dot", "aria-hidden": "true" }),
        el("span", { className: "ahentic-child-title", text: child.title }),
        el("span", {
          className: "ahentic-artifact-meta",
          text:
            (STATUS_TEXT[child.status] || child.status) +
            " · " +
            gettext("%(tokens)s tokens", { tokens: formatTokens(child.tokensUsed) }),
        }),
        el("button", {
          type: "button",
          className: "ahentic-link",
          text: gettext("Open"),
          "aria-label": gettext("Open sub-agent %(title)s", { title: child.title }),
          onclick: () => app.openChild(child),
        }),
      ),
    ),
  );
  show(ui.childrenBox, children.length > 0);
}

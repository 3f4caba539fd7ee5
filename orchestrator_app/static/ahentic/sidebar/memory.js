/*
 * "What I remember": the memory the chat's agent keeps about the user (GET agents/{slug}/memory),
 * each file with a delete button, and "Forget everything" (both confirmed). Shown under the chat
 * when the agent keeps memory or still holds some; reloaded when opened, when the chat's agent
 * changes and when the chat changes while no run is live (the agent may have written meanwhile).
 * File text is textContent.
 */
import { isLive } from "./api.js";
import { el, fill, formatBytes, show } from "./dom.js";
import { gettext } from "./i18n.js";

const ROOT = "/memories/";

/** The chat's agent: the payload's (a chat pins one); the site's default agent otherwise. */
function agentOf(payload) {
  return (payload && payload.agent && payload.agent.slug) || "default";
}

export function createMemoryPanel(app) {
  const { client } = app;
  const box = el("details", { className: "ahentic-children ahentic-memory", "data-role": "memory-box" });
  const count = el("span", { "data-role": "memory-count", text: "0" });
  const list = el("ul", { "data-role": "memory" });
  const clear = el("button", {
    type: "button",
    className: "ahentic-link",
    "data-role": "memory-clear",
    text: gettext("Forget everything"),
  });
  box.append(el("summary", {}, gettext("What I remember") + " (", count, ")"), list, clear);
  box.hidden = true;
  const anchor = app.ui.childrenBox || app.ui.artifactsBox;
  anchor.after(box);

  let slug = null;
  let seen = null; // the chat's ETag when the memory was last loaded
  let body = null;

  function path(rest) {
    return "agents/" + encodeURIComponent(slug) + "/memory" + (rest ? "/" + rest : "");
  }

  async function load() {
    if (!slug) return;
    const asked = slug;
    const result = await client.api("GET", path());
    if (asked !== slug) return;
    body = result.ok ? result.data : null;
    draw();
  }

  function draw() {
    const files = (body && body.files) || [];
    show(box, !!body && (!!body.memory || files.length > 0));
    count.textContent = String(files.length);
    show(clear, files.length > 0);
    fill(
      list,
      files.length
        ? files.map((file) => {
            const name = file.path.startsWith(ROOT) ? file.path.slice(ROOT.length) : file.path;
            return el(
              "li",
              { className: "ahentic-child", "data-path": file.path },
              el("span", { className: "ahentic-child-title", text: name }),
              el("span", { className: "ahentic-artifact-meta", text: formatBytes(file.size) }),
              el("button", {
                type: "button",
                className: "ahentic-link",
                text: gettext("Delete"),
                "aria-label": gettext("Forget %(name)s", { name }),
                onclick: () => forget(name),
              }),
            );
          })
        : el("li", { className: "ahentic-artifact-meta", text: gettext("Nothing yet.") }),
    );
  }

  async function forget(name) {
    const question = gettext("Forget \"%(name)s\"? The agent will no longer remember it.", { name });
    if (!window.confirm(question)) return;
    const encoded = name.split("/").map(encodeURIComponent).join("/");
    await client.api("DELETE", path(encoded));
    await load();
  }

  clear.addEventListener("click", async () => {
    if (!window.confirm(gettext("Forget everything this agent remembers about you?"))) return;
    await client.api("DELETE", path());
    await load();
  });
  box.addEventListener("toggle", () => {
    if (box.open) load();
  });

  /** Called with the active chat on every render. */
  function render(s) {
    const payload = s && s.payload;
    const agent = payload ? agentOf(payload) : null;
    if (agent !== slug) {
      slug = agent;
      seen = s ? s.etag : null;
      body = null;
      show(box, false);
      load();
    } else if (payload && !isLive(payload) && s.etag !== seen) {
      // The chat changed and is not running: its agent may have written meanwhile.
      seen = s.etag;
      load();
    }
  }

  return { render, load };
}

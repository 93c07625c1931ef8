// The console's only script: live updates of a run page (SSE), forms sent without a
// reload, countdowns. Pages work without it (plain form posts); no build step.
"use strict";

function say(text, isError) {
  const box = document.getElementById("message");
  if (!box) return;
  box.textContent = text;
  box.classList.toggle("error", !!isError);
  box.classList.toggle("empty", !text);
}

function tickCountdowns() {
  for (const el of document.querySelectorAll(".countdown[data-deadline]")) {
    const at = Date.parse(el.dataset.deadline);
    if (Number.isNaN(at)) continue;
    let s = Math.floor((at - Date.now()) / 1000);
    if (s <= 0) { el.textContent = "passed"; continue; }
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    el.textContent = d ? `in ${d}d ${h}h` : h ? `in ${h}h ${m}m` : `in ${m}m ${s}s`;
  }
}

async function refreshPanel(runId) {
  const response = await fetch(`/runs/${encodeURIComponent(runId)}/panel`, { credentials: "same-origin" });
  if (!response.ok) return;
  const panel = document.getElementById("panel");
  if (panel) panel.innerHTML = await response.text();
}

// Forms are sent with fetch; the server answers JSON with a message (and where to go).
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.classList.contains("act")) return;
  event.preventDefault();
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
  const body = new FormData(form, event.submitter);
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  try {
    const response = await fetch(form.action, {
      method: "POST", body, credentials: "same-origin", headers: { Accept: "application/json" },
    });
    const reply = await response.json().catch(() => ({ ok: false, message: `error ${response.status}` }));
    say(reply.message, !response.ok);
    if (response.ok && form.classList.contains("composer")) form.reset();
    if (response.ok && form.dataset.navigate && reply.location) {
      window.location.assign(reply.location);
      return;
    }
  } catch (err) {
    say(`not sent: ${err}`, true);
  }
  const run = document.querySelector(".run[data-run]");
  if (run) await refreshPanel(run.dataset.run);
  for (const button of form.querySelectorAll("button")) button.disabled = false;
});

function addMoment(list, item) {
  if (list.querySelector(`li[data-offset="${item.offset}"]`)) return; // never twice
  const li = document.createElement("li");
  li.dataset.offset = String(item.offset);
  li.className = `moment k-${item.kind.replace(/\W+/g, "-")}${item.preview_unreadable ? " unreadable" : ""}`;
  const head = document.createElement("div");
  const when = new Date(item.at).toLocaleTimeString();
  head.innerHTML = "<span class=\"n\"></span> <strong class=\"kind\"></strong> <span class=\"detail\"></span> <span class=\"at\"></span>";
  head.querySelector(".n").textContent = `#${item.offset}`;
  head.querySelector(".kind").textContent = item.kind;
  head.querySelector(".detail").textContent = item.detail;
  head.querySelector(".at").textContent = `${when} · ${item.status}${item.step ? ` · step ${item.step}` : ""}`;
  li.appendChild(head);
  if (item.preview) {
    const text = document.createElement("p");
    text.className = "preview";
    text.textContent = item.preview;
    li.appendChild(text);
  }
  list.appendChild(li);
}

// A conversation's live replies: one bubble per segment of the live log. An abandoned
// segment (its attempt died) is removed, so the retry's reply replaces it, never joins it.
function followReplies(source, chat) {
  const live = document.getElementById("live");
  const bubbles = new Map();
  const bubble = (segment) => {
    let li = bubbles.get(segment);
    if (!li) {
      li = document.createElement("li");
      li.className = "said by-agent streaming";
      li.dataset.segment = segment;
      li.innerHTML = "<span class=\"who\"></span> <span class=\"text\"></span>";
      li.querySelector(".who").textContent = chat.dataset.agent || "agent";
      live.appendChild(li);
      bubbles.set(segment, li);
    }
    return li;
  };
  source.addEventListener("segment", (e) => {
    const item = JSON.parse(e.data);
    if (item.status === "open") bubble(item.segment);
    else if (item.status === "abandoned") {
      const li = bubbles.get(item.segment);
      if (li) li.remove();
      bubbles.delete(item.segment);
    } else if (item.status === "done") {
      const li = bubbles.get(item.segment);
      if (li) { li.classList.remove("streaming"); li.classList.add("done"); }
    }
  });
  source.addEventListener("delta", (e) => {
    const item = JSON.parse(e.data);
    bubble(item.segment).querySelector(".text").textContent += item.text;
  });
  // A turn answered: the thread is read again, and the finished bubbles give way to it.
  source.addEventListener("moment", async (e) => {
    const item = JSON.parse(e.data);
    if (item.kind !== "replied" && item.kind !== "message") return;
    const response = await fetch(window.location.pathname, { credentials: "same-origin" });
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("thread");
    if (fresh) document.getElementById("thread").replaceWith(fresh);
    if (item.kind === "replied") {
      for (const [segment, li] of bubbles) {
        if (li.classList.contains("done")) { li.remove(); bubbles.delete(segment); }
      }
    }
  });
}

function followRun(run) {
  const runId = run.dataset.run;
  const list = document.getElementById("timeline");
  const chat = document.querySelector(".chat[data-chat]");
  let shown = null;
  // After the last moment the page was served with: it never asks for what it shows.
  const after = Number.parseInt(run.dataset.after || "0", 10) || 0;
  // A conversation's page also follows the live log, from the reply streaming as it was served.
  const pos = Number.parseInt(run.dataset.pos || "0", 10) || 0;
  const deltas = chat ? `&deltas=1&pos=${pos}` : "";
  const source = new EventSource(`/runs/${encodeURIComponent(runId)}/events?after=${after}${deltas}`);
  if (chat) followReplies(source, chat);
  source.addEventListener("moment", (e) => addMoment(list, JSON.parse(e.data)));
  source.addEventListener("status", (e) => {
    const status = JSON.parse(e.data);
    const key = `${status.status}/${status.moment}/${status.pending.join(",")}`;
    if (shown !== null && key !== shown) refreshPanel(runId);
    shown = key;
    run.dataset.live = status.status;
  });
  source.addEventListener("unavailable", (e) => say(JSON.parse(e.data).error, true));
  source.addEventListener("end", () => { source.close(); refreshPanel(runId); run.dataset.ended = "yes"; });
}

document.addEventListener("DOMContentLoaded", () => {
  tickCountdowns();
  setInterval(tickCountdowns, 1000);
  const run = document.querySelector(".run[data-run]");
  if (run) followRun(run);
});

// graphrag-rs web UI: documents, graph explorer, query panel. Plain
// JavaScript over the server's JSON API; the graph is drawn on a canvas
// with a small force layout (only the requested subgraph). Answers are
// Markdown, rendered by marked and sanitised by DOMPurify (vendor/).
"use strict";

const $ = (sel) => document.querySelector(sel);
const keyInput = $("#api-key");
keyInput.value = localStorage.getItem("graphrag-api-key") || "";
keyInput.addEventListener("change", () => localStorage.setItem("graphrag-api-key", keyInput.value));

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (keyInput.value) h["X-API-Key"] = keyInput.value;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const r = await fetch(path, opts);
  const text = await r.text();
  let body;
  try { body = JSON.parse(text); } catch (_) { body = text; }
  if (!r.ok) throw new Error((body && body.detail) || r.status + " " + r.statusText);
  return body;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

// Tabs
for (const b of document.querySelectorAll("nav button")) {
  b.addEventListener("click", () => showTab(b.dataset.tab));
}
function showTab(name) {
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const p of document.querySelectorAll(".panel")) p.classList.toggle("active", p.id === name);
  if (name === "graph") resizeCanvas();
}

// Documents
async function refreshDocuments() {
  try {
    const [docs, pipe] = await Promise.all([api("/documents"), api("/documents/pipeline_status")]);
    const tbody = $("#doc-table tbody");
    tbody.replaceChildren();
    for (const status of ["processing", "pending", "failed", "processed"]) {
      for (const d of docs.statuses[status] || []) {
        tbody.append(el("tr", { "data-file": d.file_path, "data-status": d.status },
          el("td", {}, d.file_path),
          el("td", { class: "status-" + d.status }, d.status),
          el("td", {}, d.chunks_count),
          el("td", {}, d.updated_at || ""),
          el("td", { class: "error" }, d.error_msg || ""),
          el("td", {}, el("button", { onclick: () => deleteDocument(d) }, "Delete"))));
      }
    }
    $("#pipeline").textContent = pipelineLine(pipe) +
      (pipe.request_pending ? " (another update queued)" : "") + "\n" + (pipe.latest_message || "");
  } catch (e) {
    $("#pipeline").textContent = "Error: " + e.message;
  }
}

// The run's step is known once its plan is: before that it is starting.
function pipelineLine(pipe) {
  if (!pipe.busy) return "Idle";
  if (!pipe.batchs) return "Updating: starting";
  return "Updating: step " + pipe.cur_batch + "/" + pipe.batchs + " " + (pipe.step || "");
}

async function deleteDocument(d) {
  if (!d.id.startsWith("file-") && !confirm("Delete " + d.file_path + " from the index?")) return;
  try {
    await api("/documents/delete_document", { method: "DELETE", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ doc_ids: [d.id] }) });
  } catch (e) { alert(e.message); }
  refreshDocuments();
}

$("#upload-btn").addEventListener("click", async () => {
  const files = $("#file-input").files;
  if (!files.length) return;
  const form = new FormData();
  for (const f of files) form.append("file", f, f.name);
  try {
    const r = await api("/documents/upload", { method: "POST", body: form });
    $("#upload-result").textContent = r.message;
  } catch (e) {
    $("#upload-result").textContent = "Error: " + e.message;
  }
  refreshDocuments();
});
$("#scan-btn").addEventListener("click", async () => {
  try { $("#upload-result").textContent = (await api("/documents/scan", { method: "POST" })).message; }
  catch (e) { $("#upload-result").textContent = "Error: " + e.message; }
  refreshDocuments();
});
refreshDocuments();
setInterval(() => { if ($("#documents").classList.contains("active")) refreshDocuments(); }, 1500);

// Graph explorer
const canvas = $("#graph-canvas");
const ctx = canvas.getContext("2d");
let graph = { nodes: [], edges: [] };
let selected = null;
const palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const colour = (c) => (c < 0 ? "#999" : palette[c % palette.length]);

function resizeCanvas() {
  const w = Math.max(400, Math.min(canvas.parentElement.clientWidth * 0.68, 1200));
  canvas.width = w; canvas.height = 600; draw();
}

// Suggestions: one request once typing pauses, the previous one cancelled.
const SEARCH_PAUSE_MS = 250;
let searchTimer = null, searchRequest = null;
$("#entity-search").addEventListener("input", (e) => {
  clearTimeout(searchTimer);
  const q = e.target.value.trim();
  if (q.length < 1) return;
  searchTimer = setTimeout(() => suggestEntities(q), SEARCH_PAUSE_MS);
});
async function suggestEntities(q) {
  if (searchRequest) searchRequest.abort();
  const request = searchRequest = new AbortController();
  try {
    const names = await api("/graph/label/list?limit=20&q=" + encodeURIComponent(q), { signal: request.signal });
    $("#entity-list").replaceChildren(...names.map((n) => el("option", { value: n })));
  } catch (_) { /* aborted, or shown when Show is pressed */ }
}
$("#entity-search").addEventListener("keydown", (e) => { if (e.key === "Enter") showGraph(); });
$("#show-graph").addEventListener("click", () => showGraph());

async function showGraph(label) {
  label = label || $("#entity-search").value.trim() || "*";
  const depth = $("#graph-depth").value, max = $("#graph-max").value;
  try {
    const g = await api("/graphs?label=" + encodeURIComponent(label) + "&max_depth=" + depth + "&max_nodes=" + max);
    layout(g, label);
    const info = $("#graph-info");
    info.classList.toggle("notice", !g.nodes.length);
    if (!g.nodes.length) {
      selected = null;
      info.textContent = emptyGraphMessage(label);
      $("#node-details").replaceChildren(el("p", { class: "notice" }, info.textContent));
      return;
    }
    info.textContent = g.nodes.length + " nodes, " + g.edges.length + " edges" + (g.is_truncated ? " (truncated)" : "");
    if (label !== "*") selectNode(g.nodes.find((n) => n.id.toLowerCase() === label.toLowerCase()) || g.nodes[0]);
  } catch (e) {
    $("#graph-info").textContent = "Error: " + e.message;
  }
}

function emptyGraphMessage(label) {
  if (label === "*") return "The index has no entities yet: upload documents and wait until they are processed.";
  return "No entity named \u201c" + label + "\u201d in the graph. Check the spelling (the suggestions list the names); " +
    "it may also have been merged into another entity or pruned as too rare.";
}

// A force layout: spring edges, repelling nodes, run for a fixed number of steps.
function layout(g, centre) {
  const w = canvas.width, h = canvas.height;
  const index = new Map();
  const nodes = g.nodes.map((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, g.nodes.length);
    const node = { id: n.id, props: n.properties, x: w / 2 + Math.cos(a) * w / 4, y: h / 2 + Math.sin(a) * h / 4, vx: 0, vy: 0 };
    index.set(n.id, node);
    return node;
  });
  const edges = g.edges.map((e) => ({ s: index.get(e.source), t: index.get(e.target), props: e.properties })).filter((e) => e.s && e.t);
  const k = Math.sqrt((w * h) / Math.max(1, nodes.length)) * 0.6;
  const steps = nodes.length > 500 ? 60 : 200;
  for (let step = 0; step < steps; step++) {
    const temp = (1 - step / steps) * 20 + 0.5;
    for (const a of nodes) { a.vx = 0; a.vy = 0; }
    for (let i = 0; i < nodes.length; i++) {
      for (let j = i + 1; j < nodes.length; j++) {
        const a = nodes[i], b = nodes[j];
        let dx = a.x - b.x, dy = a.y - b.y;
        const d2 = Math.max(dx * dx + dy * dy, 0.01), d = Math.sqrt(d2);
        const f = (k * k) / d;
        dx /= d; dy /= d;
        a.vx += dx * f; a.vy += dy * f; b.vx -= dx * f; b.vy -= dy * f;
      }
    }
    for (const e of edges) {
      let dx = e.s.x - e.t.x, dy = e.s.y - e.t.y;
      const d = Math.max(Math.sqrt(dx * dx + dy * dy), 0.01), f = (d * d) / k;
      dx /= d; dy /= d;
      e.s.vx -= dx * f; e.s.vy -= dy * f; e.t.vx += dx * f; e.t.vy += dy * f;
    }
    for (const a of nodes) {
      a.vx += (w / 2 - a.x) * 0.02; a.vy += (h / 2 - a.y) * 0.02;
      const v = Math.sqrt(a.vx * a.vx + a.vy * a.vy) || 1;
      a.x += (a.vx / v) * Math.min(v, temp); a.y += (a.vy / v) * Math.min(v, temp);
      a.x = Math.min(w - 20, Math.max(20, a.x)); a.y = Math.min(h - 20, Math.max(20, a.y));
    }
  }
  graph = { nodes, edges, centre };
  draw();
}

function radius(n) { return 4 + Math.min(10, Math.sqrt(n.props.degree || 1) * 1.5); }

function draw() {
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.strokeStyle = "#c8ced6"; ctx.lineWidth = 1;
  for (const e of graph.edges) {
    ctx.beginPath(); ctx.moveTo(e.s.x, e.s.y); ctx.lineTo(e.t.x, e.t.y); ctx.stroke();
  }
  const labels = graph.nodes.length <= 80;
  for (const n of graph.nodes) {
    ctx.beginPath(); ctx.arc(n.x, n.y, radius(n), 0, 2 * Math.PI);
    ctx.fillStyle = colour(n.props.community); ctx.fill();
    if (selected && selected === n.id) { ctx.lineWidth = 3; ctx.strokeStyle = "#111"; ctx.stroke(); ctx.lineWidth = 1; ctx.strokeStyle = "#c8ced6"; }
    if (labels || n.id === graph.centre || n.id === selected) {
      ctx.fillStyle = "#222"; ctx.font = "11px system-ui"; ctx.fillText(n.id, n.x + radius(n) + 2, n.y + 4);
    }
  }
}

canvas.addEventListener("click", (ev) => {
  const r = canvas.getBoundingClientRect();
  const x = (ev.clientX - r.left) * (canvas.width / r.width), y = (ev.clientY - r.top) * (canvas.height / r.height);
  let best = null, bestD = 400;
  for (const n of graph.nodes) {
    const d = (n.x - x) ** 2 + (n.y - y) ** 2;
    if (d < bestD) { best = n; bestD = d; }
  }
  if (best) selectNode({ id: best.id });
});
canvas.addEventListener("dblclick", () => { if (selected) { $("#entity-search").value = selected; showGraph(selected); } });

async function selectNode(n) {
  selected = n.id; draw();
  const panel = $("#node-details");
  try {
    const d = await api("/graph/entity/detail?name=" + encodeURIComponent(n.id));
    panel.replaceChildren(
      el("h3", {}, d.title),
      el("p", {}, el("b", {}, "type "), d.type, "  ", el("b", {}, "degree "), d.degree, "  ", el("b", {}, "community "), d.community),
      el("p", {}, d.description),
      el("h4", {}, "Relationships (" + d.relationships.length + ")"),
      el("ul", {}, ...d.relationships.slice(0, 30).map((r) => el("li", {}, el("b", {}, r.neighbour), ": ", r.description))),
      el("h4", {}, "Source text units (" + d.text_units.length + ")"),
      ...d.text_units.slice(0, 10).map((u) => el("div", { class: "unit" }, el("b", {}, u.document), "\n", u.text)),
      el("p", { class: "hint" }, "Double-click the canvas to centre the graph on this entity."));
  } catch (e) {
    panel.replaceChildren(el("p", { class: "error" }, e.message));
  }
}

// Query
$("#query-run").addEventListener("click", runQuery);

// Without a usable chat model the server refuses questions: say so up front
// and ask for the context instead.
async function checkChatModel() {
  try {
    const chat = (await api("/health")).configuration.chat_model;
    if (!chat || chat.configured) return;
    $("#query-context-only").checked = true;
    $("#query-notice").textContent = chat.detail.charAt(0).toUpperCase() + chat.detail.slice(1) +
      ". Questions are refused; the retrieved context is shown (context only).";
  } catch (_) { /* the query itself reports a server that is down */ }
}
checkChatModel();
async function runQuery() {
  const answer = $("#query-answer"), refs = $("#query-references"), records = $("#query-records");
  answer.replaceChildren(); refs.replaceChildren(); records.replaceChildren();
  answer.classList.remove("error");
  delete answer.dataset.done;
  // Pieces are rendered at most once a frame: a long answer is not re-parsed per token.
  let text = "", frame = 0;
  const render = () => { frame = 0; if (!answer.classList.contains("error")) answer.innerHTML = markdown(text); };
  const body = {
    query: $("#query-text").value, mode: $("#query-method").value,
    only_need_context: $("#query-context-only").checked, include_context_records: true,
  };
  try {
    const r = await fetch("/query/stream", { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
    if (!r.ok) { const e = await r.json().catch(() => ({})); throw new Error(e.detail || r.statusText); }
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl); buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const m = JSON.parse(line);
        if (m.response && m.llm_generated === false) showContext(answer, m.response);
        else if (m.response) { text += m.response; if (!frame) frame = requestAnimationFrame(render); }
        if (m.error) { answer.textContent = "Error: " + m.error; answer.classList.add("error"); }
        if (m.references) refs.replaceChildren(el("b", {}, "References: "), m.references.map((x) => "[" + x.reference_id + "] " + x.file_path).join("  "));
        if (m.context_records) showRecords(m.context_records);
      }
    }
    if (frame) { cancelAnimationFrame(frame); render(); }
    answer.dataset.done = "1";
  } catch (e) {
    if (frame) cancelAnimationFrame(frame);
    answer.textContent = "Error: " + e.message; answer.classList.add("error"); answer.dataset.done = "1";
  }
}

// A model's answer as HTML: Markdown rendered, then sanitised (the text
// comes from documents and a model, neither trusted with the page).
function markdown(text) {
  return DOMPurify.sanitize(marked.parse(text));
}

// The retrieved context (context only: no model was asked), labelled as such.
function showContext(answer, context) {
  answer.replaceChildren(el("p", { class: "notice" }, "Retrieved context (no model was asked):"), el("pre", { class: "context" }, context));
}

function showRecords(rec) {
  const out = $("#query-records");
  out.className = "records";
  for (const [name, rows] of Object.entries(rec)) {
    if (!Array.isArray(rows) || !rows.length || typeof rows[0] !== "object") continue;
    const cols = Object.keys(rows[0]);
    out.append(el("h4", {}, name + " (" + rows.length + ")"),
      el("table", {}, el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", {}, c)))),
        el("tbody", {}, ...rows.slice(0, 50).map((r) => el("tr", {}, ...cols.map((c) => el("td", {}, String(r[c]).slice(0, 300))))))));
  }
}

window.addEventListener("resize", () => { if ($("#graph").classList.contains("active")) resizeCanvas(); });

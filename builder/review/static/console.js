// DataSpace review console: a thin client of /api. Everything it may show or do is decided
// by the server; this page only lays it out. No external request, no inline script.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { me: null, vocab: null, task: null, view: null, files: [], filter: "all", gold: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return node;
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const ctype = r.headers.get("Content-Type") || "";
  const data = ctype.startsWith("application/json") ? await r.json() : await r.blob();
  if (!r.ok) {
    const err = new Error((data && data.error) || r.statusText);
    err.status = r.status;
    throw err;
  }
  return data;
}

function show(id, on) { $(id).classList.toggle("hidden", !on); }
function flash(text) { const f = $("flash"); f.textContent = text; show("flash", !!text); }

function tableOf(header, rows) {
  const t = el("table", { class: "grid data" });
  t.append(el("thead", {}, el("tr", {}, ...header.map((h) => el("th", {}, h)))));
  const tb = el("tbody");
  for (const r of rows) tb.append(el("tr", {}, ...r.map((c) => el("td", {}, c === null ? "NULL" : c))));
  t.append(tb);
  return t;
}

// ---- login ---------------------------------------------------------------------------
async function boot() {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("login-error").textContent = "";
    try {
      await api("POST", "/api/login", { name: $("login-name").value, password: $("login-password").value });
      await start();
    } catch (e) { $("login-error").textContent = e.message; }
  });
  $("logout").addEventListener("click", async () => { await api("POST", "/api/logout", {}); location.reload(); });
  $("phase1").addEventListener("submit", submitPhase1);
  $("phase2").addEventListener("submit", submitPhase2);
  $("message-form").addEventListener("submit", postMessage);
  $("repair").addEventListener("submit", submitRepair);
  $("add-evidence").addEventListener("click", () => addEvidence({}));
  $("accept-btn").addEventListener("click", () => decide("accept", {}));
  $("remove-btn").addEventListener("click", () => decide("remove", { reason: $("remove-reason").value }));
  $("assign-btn").addEventListener("click", () => decide("assign", { reviewer: $("assign-name").value }));
  $("show-status").addEventListener("click", showOverview);
  try { await start(); } catch (e) { show("login-view", true); }
}

async function start() {
  state.me = await api("GET", "/api/me");
  state.vocab = await api("GET", "/api/vocabulary");
  $("whoami").textContent = `${state.me.name} (${state.me.role})`;
  show("login-view", false); show("app", true); show("logout", true);
  show("admin-tools", state.me.role === "admin");
  buildStaticForms();
  await loadTasks();
  // a link to one task (the report's list of tasks no agent solved): #task_N
  const linked = /^#(task_\d+)$/.exec(location.hash);
  if (linked) { try { await openTask(linked[1]); } catch (e) { flash(e.message); } }
  document.body.dataset.ready = "1";
}

function buildStaticForms() {
  const v = state.vocab;
  $("p2-verdict").replaceChildren(...v.verdicts.map((x) => el("option", { value: x }, x)));
  $("p2-disposition").replaceChildren(...v.dispositions.map((x) => el("option", { value: x }, x.replace("_", " "))));
  $("semantics").replaceChildren(...v.semantics_fields.map((f) =>
    el("label", {}, f, el("input", { id: `sem-${f}`, "data-field": f }))));
  for (const id of ["p1-issues", "p2-issues"]) {
    const box = $(id);
    box.replaceChildren();
    for (const [cat, flags] of Object.entries(v.issue_taxonomy)) {
      box.append(el("fieldset", {}, el("legend", {}, cat),
        ...flags.map((f) => el("label", {}, el("input", { type: "checkbox", value: `${cat}.${f}` }), f.replaceAll("_", " ")))));
    }
  }
  $("repair-scope").replaceChildren(...v.repair_scopes.map((s) =>
    el("label", {}, el("input", { type: "checkbox", value: s, id: `scope-${s}` }), s)));
}

async function loadTasks() {
  const tasks = await api("GET", "/api/tasks");
  $("task-list").replaceChildren(...tasks.map((t) => el("li", {},
    el("a", { href: "#", "data-task": t.task_id, onclick: (e) => { e.preventDefault(); openTask(t.task_id); } },
      `${t.task_id} · ${t.state}${t.todo ? " · " + t.todo : ""} (v${t.version})`))));
}

// ---- a task --------------------------------------------------------------------------
async function openTask(taskId) {
  flash("");
  state.task = taskId;
  show("overview", false);
  const v = await api("GET", `/api/tasks/${taskId}`);
  state.view = v;
  $("task-id").textContent = taskId;
  $("task-version").textContent = v.version;
  $("task-state").textContent = v.state;
  $("question").textContent = v.question;
  $("todo").textContent = v.todo ? `your next step: ${v.todo}` : (v.reviewers ? `reviewers: ${v.reviewers.join(", ")}` : "");
  $("versions").replaceChildren(...(v.versions || []).filter((x) => x.version > 1).map((x) =>
    el("p", { class: "muted" }, `version ${x.version}: repaired ${x.scope.join(", ")} by ${x.by} — ${x.reason}`)));
  show("task", true);
  state.files = await api("GET", `/api/tasks/${taskId}/files`);
  renderFiles();
  const reviewer = state.me.role === "reviewer";
  const final = ["accepted", "removed"].includes(v.state);
  show("phase1", reviewer && v.todo === "phase1");
  show("phase2", reviewer && v.todo === "phase2");
  if (reviewer && v.todo === "phase1") resetPhase1();
  state.gold = null;
  const seesGold = !reviewer || v.phase1_locked;
  show("comparison", seesGold);
  if (seesGold) await loadGold();
  if (reviewer && v.todo === "phase2") buildConfigEditor();
  const seesRecords = !reviewer || v.phase2_locked || (v.my || []).some((r) => r.phase2);
  show("records", seesRecords);
  if (seesRecords) await loadRecords();
  const seesDiscussion = !reviewer || v.phase2_locked;
  show("discussion", seesDiscussion && ["adjudication", "consensus", "recheck", "accepted", "removed"].includes(v.state));
  if (seesDiscussion) await loadMessages();
  show("message-form", !final);
  show("repair", !reviewer && v.state === "adjudication");
  if (!reviewer && v.state === "adjudication") $("repair-question").value = v.question;
  show("decision", state.me.role === "admin");
  $("decision-text").textContent = v.decision ? `${v.decision.decision} by ${v.decision.by} at ${v.decision.at}${v.decision.reason ? ": " + v.decision.reason : ""}`
    : (v.agreed_config ? "consensus reached: all reviewers matched, passed and wrote the same config" : "no decision yet");
  document.body.dataset.task = taskId;
  document.body.dataset.taskState = v.state;
}

function renderFiles() {
  const mods = ["all", ...new Set(state.files.map((f) => f.modality))];
  $("modality-filter").replaceChildren(...mods.map((m) => el("button", {
    type: "button", class: m === state.filter ? "on" : "", "data-modality": m,
    onclick: () => { state.filter = m; renderFiles(); } }, m)));
  const files = state.files.filter((f) => state.filter === "all" || f.modality === state.filter);
  $("file-list").replaceChildren(...files.map((f) => el("li", {},
    el("a", { href: "#", "data-path": f.path, onclick: (e) => { e.preventDefault(); openFile(f); } },
      `${f.path}`), el("small", { class: "muted" }, ` ${f.modality}${f.overlay ? " · repaired" : ""}`))));
  const sel = $("msg-path");
  sel.replaceChildren(el("option", { value: "question" }, "the question"),
    ...state.files.map((f) => el("option", { value: f.path }, f.path)));
}

function anchorButton(f, kind, valueFn) {
  return el("button", { type: "button", class: "anchor-btn", onclick: () =>
    addEvidence({ path: f.path, modality: f.modality, anchor_kind: kind, anchor: valueFn() }) }, `Add ${kind} anchor`);
}

async function openFile(f) {
  const t = state.task, q = encodeURIComponent(f.path);
  const box = $("viewer");
  box.replaceChildren(el("h4", {}, f.path));
  box.dataset.path = f.path;
  box.dataset.loaded = "";
  try {
    if (f.modality === "csv" || f.modality === "json") {
      const tab = await api("GET", `/api/tasks/${t}/table?path=${q}`);
      box.append(el("p", { class: "muted" }, `${tab.total} rows`), tableOf(tab.header, tab.rows),
        el("label", {}, "row ", el("input", { id: "row-anchor", size: 6 })), anchorButton(f, "row", () => $("row-anchor").value));
    } else if (f.modality === "sqlite") {
      const ta = el("textarea", { id: "sql-input", rows: 3, spellcheck: "false" });
      ta.value = "SELECT name FROM sqlite_master WHERE type = 'table'";
      const out = el("div", { id: "sql-output" });
      const run = el("button", { type: "button", id: "sql-run", onclick: async () => {
        try {
          const res = await api("POST", `/api/tasks/${t}/sqlite`, { path: f.path, sql: ta.value });
          out.replaceChildren(tableOf(res.header, res.rows), el("p", { class: "muted" }, res.truncated ? "first rows only" : `${res.rows.length} rows`));
        } catch (e) { out.replaceChildren(el("p", { class: "error" }, e.message)); }
      } }, "Run read-only query");
      box.append(ta, run, out, el("label", {}, "key ", el("input", { id: "key-anchor" })), anchorButton(f, "key", () => $("key-anchor").value));
    } else if (f.modality === "markdown") {
      const md = await api("GET", `/api/tasks/${t}/markdown?path=${q}`);
      const div = el("div", { class: "markdown", id: "markdown-view" });
      div.innerHTML = md.html; // rendered by the server with raw HTML disabled
      box.append(div, el("label", {}, "section ", el("input", { id: "section-anchor" })), anchorButton(f, "section", () => $("section-anchor").value));
    } else if (f.modality === "pdf") {
      const info = await api("GET", `/api/tasks/${t}/pdf?path=${q}`);
      const img = el("img", { id: "pdf-page", alt: "PDF page" });
      const num = el("input", { id: "pdf-page-num", type: "number", min: 1, max: info.pages, value: 1 });
      const load = () => { img.src = `/api/tasks/${t}/pdf/page?path=${q}&page=${num.value}`; };
      num.addEventListener("change", load);
      box.append(el("label", {}, `page (of ${info.pages}) `, num), anchorButton(f, "page", () => num.value), el("div", {}, img));
      load();
    } else if (f.modality === "video") {
      const video = el("video", { id: "video-view", controls: "", preload: "metadata", src: `/api/tasks/${t}/file?path=${q}` });
      const ts = el("input", { id: "video-time", size: 8, value: "0" });
      const grab = el("button", { type: "button", id: "video-grab", onclick: () => { ts.value = video.currentTime.toFixed(2); } }, "Use current time");
      const seek = el("button", { type: "button", id: "video-seek", onclick: () => { video.currentTime = parseFloat(ts.value) || 0; } }, "Seek");
      box.append(video, el("div", {}, el("label", {}, "time (s) ", ts), grab, seek, anchorButton(f, "timestamp", () => ts.value)));
    } else {
      box.append(el("a", { href: `/api/tasks/${t}/file?path=${q}`, download: f.path }, "download"));
    }
  } catch (e) { box.append(el("p", { class: "error" }, e.message)); }
  box.dataset.loaded = f.path;
}

// ---- phase 1 -------------------------------------------------------------------------
function resetPhase1() {
  $("evidence-rows").replaceChildren();
  $("p1-result").value = "";
  $("p1-error").textContent = "";
}

function addEvidence(a) {
  const v = state.vocab;
  const paths = state.files.map((f) => f.path);
  const row = el("tr", { class: "evidence" });
  const path = el("select", { class: "ev-path" }, ...paths.map((p) => el("option", { value: p }, p)));
  const modality = el("input", { class: "ev-modality", readonly: "", size: 8 });
  const setModality = () => { const f = state.files.find((x) => x.path === path.value); modality.value = f ? f.modality : ""; };
  path.addEventListener("change", setModality);
  const kind = el("select", { class: "ev-kind" }, ...v.anchor_kinds.map((k) => el("option", { value: k }, k)));
  const anchor = el("input", { class: "ev-anchor", size: 10 });
  const fact = el("input", { class: "ev-fact" });
  const role = el("select", { class: "ev-role" }, ...v.evidence_roles.map((r) => el("option", { value: r }, r)));
  if (a.path) path.value = a.path;
  if (a.anchor_kind) kind.value = a.anchor_kind;
  anchor.value = a.anchor || "";
  setModality();
  row.append(el("td", {}, path), el("td", {}, modality), el("td", {}, kind), el("td", {}, anchor), el("td", {}, fact), el("td", {}, role),
    el("td", {}, el("button", { type: "button", onclick: () => row.remove() }, "×")));
  $("evidence-rows").append(row);
  return row;
}

function checked(boxId) {
  return [...$(boxId).querySelectorAll("input[type=checkbox]:checked")].map((c) => c.value);
}

async function submitPhase1(ev) {
  ev.preventDefault();
  const evidence = [...document.querySelectorAll("#evidence-rows tr.evidence")].map((r) => ({
    path: r.querySelector(".ev-path").value, modality: r.querySelector(".ev-modality").value,
    anchor_kind: r.querySelector(".ev-kind").value, anchor: r.querySelector(".ev-anchor").value,
    fact: r.querySelector(".ev-fact").value, role: r.querySelector(".ev-role").value }));
  const semantics = {};
  for (const f of state.vocab.semantics_fields) { const x = $(`sem-${f}`).value.trim(); if (x) semantics[f] = x; }
  const body = { result_csv: $("p1-result").value, evidence, semantics, issues: checked("p1-issues"),
    confidence: parseInt($("p1-confidence").value, 10), rationale: $("p1-rationale").value };
  try {
    await api("POST", `/api/tasks/${state.task}/phase1`, body);
    flash("Phase 1 locked.");
    await openTask(state.task); await loadTasks();
  } catch (e) { $("p1-error").textContent = e.message; }
}

// ---- gold, comparison, phase 2 --------------------------------------------------------
async function loadGold() {
  const g = await api("GET", `/api/tasks/${state.task}/gold`);
  state.gold = g;
  $("gold-table").replaceChildren(tableOf(g.header, g.rows));
  const d = g.diagnostic;
  if (!d) { $("diag-summary").textContent = `${g.total} gold rows`; $("diag-rows").replaceChildren(); return; }
  const v = d.verdict;
  $("diag-summary").textContent = v.passed
    ? `Your locked answer equals the gold (config used: ${d.config_used}).`
    : `Your locked answer differs: ${v.error_code} — ${v.error} (config used: ${d.config_used}).`;
  const rows = [...d.missing_rows.map((r) => ["missing from yours", ...r.cells]), ...d.extra_rows.map((r) => ["only in yours", ...r.cells])];
  const shapes = `gold ${d.gold_shape[0]} rows × ${d.gold_shape[1]} columns; yours ${d.candidate_shape[0]} × ${d.candidate_shape[1]}`;
  if (d.mapping === null) $("diag-rows").replaceChildren(el("p", {}, `The tables have different widths (${shapes}).`));
  else $("diag-rows").replaceChildren(el("p", { class: "muted" }, shapes), rows.length ? tableOf(["", ...g.header], rows) : el("p", { class: "muted" }, "no row differences"));
}

function buildConfigEditor() {
  const g = state.gold;
  $("cfg-rows").replaceChildren(...g.header.map((h, j) => {
    const type = el("select", { class: "cfg-type", "data-col": j }, ...["text", "number", "date", "datetime", "boolean"].map((t) => el("option", { value: t }, t)));
    const mode = el("select", { class: "cfg-mode" }, ...["integer", "decimal_places", "significant_digits"].map((m) => el("option", { value: m }, m)));
    const digits = el("input", { class: "cfg-digits", type: "number", min: 0, max: 30, value: 2, size: 3 });
    const unit = el("select", { class: "cfg-unit" }, ...["plain", "percentage_points", "fraction"].map((u) => el("option", { value: u }, u)));
    const pct = el("input", { class: "cfg-percent", type: "checkbox" });
    return el("tr", { class: "cfg" }, el("td", {}, h), el("td", {}, type), el("td", {}, mode), el("td", {}, digits), el("td", {}, unit), el("td", {}, pct));
  }));
  $("p2-error").textContent = "";
}

function readConfig() {
  const columns = [...document.querySelectorAll("#cfg-rows tr.cfg")].map((r) => {
    const type = r.querySelector(".cfg-type").value;
    const col = { type };
    if (type === "number") {
      const mode = r.querySelector(".cfg-mode").value;
      col.comparison = mode === "integer" ? { mode } : { mode, digits: parseInt(r.querySelector(".cfg-digits").value, 10) };
      col.unit = r.querySelector(".cfg-unit").value;
      col.allow_percent_sign = r.querySelector(".cfg-percent").checked;
    }
    return col;
  });
  return { order_sensitive: $("cfg-ordered").checked, columns };
}

async function submitPhase2(ev) {
  ev.preventDefault();
  const body = { verdict: $("p2-verdict").value, disposition: $("p2-disposition").value, config: readConfig(),
    issues: checked("p2-issues"), rationale: $("p2-rationale").value };
  try {
    await api("POST", `/api/tasks/${state.task}/phase2`, body);
    flash("Phase 2 locked.");
    await openTask(state.task); await loadTasks();
  } catch (e) { $("p2-error").textContent = e.message; }
}

// ---- records, discussion, repair, decisions ----------------------------------------------
function configText(c) {
  if (!c) return "";
  return `${c.order_sensitive ? "ordered" : "unordered"}; ` + c.columns.map((x) => `${x.gold_name}: ${x.type}${x.comparison ? " " + x.comparison.mode + (x.comparison.digits !== undefined ? "(" + x.comparison.digits + ")" : "") : ""}`).join(", ");
}

async function loadRecords() {
  const res = await api("GET", `/api/tasks/${state.task}/records`);
  const body = $("records-body");
  body.replaceChildren();
  for (const [version, recs] of Object.entries(res.records)) {
    body.append(el("h4", {}, `version ${version}`), tableOf(["reviewer", "answer rows", "confidence", "verdict", "disposition", "config", "issues"],
      recs.map((r) => [r.reviewer, r.phase1 ? r.phase1.result.rows.length : "(earlier version)", r.phase1 ? r.phase1.confidence : "",
        r.phase2 ? r.phase2.verdict : "(open)", r.phase2 ? r.phase2.disposition : "", r.phase2 ? configText(r.phase2.config) : "",
        [...(r.phase1 ? r.phase1.issues : []), ...(r.phase2 ? r.phase2.issues : [])].join(" ")])));
  }
}

async function loadMessages() {
  let msgs = [];
  try { msgs = await api("GET", `/api/tasks/${state.task}/messages`); } catch (e) { msgs = []; }
  $("messages").replaceChildren(...msgs.map((m) => el("li", { class: "message" },
    el("strong", {}, `${m.actor} `), el("small", { class: "muted" }, m.at), el("div", {}, m.text),
    el("small", {}, (m.citations || []).map((c) => `↳ ${c.path}${c.anchor ? " @ " + c.anchor : ""}`).join("  ")))));
}

async function postMessage(ev) {
  ev.preventDefault();
  try {
    await api("POST", `/api/tasks/${state.task}/messages`, { text: $("msg-text").value,
      citations: [{ path: $("msg-path").value, anchor: $("msg-anchor").value }] });
    $("msg-text").value = "";
    await loadMessages();
  } catch (e) { $("msg-error").textContent = e.message; }
}

function fileB64(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result).split(",", 2)[1]);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

async function submitRepair(ev) {
  ev.preventDefault();
  const scope = checked("repair-scope");
  const body = { scope, reason: $("repair-reason").value };
  try {
    if (scope.includes("question")) body.question = $("repair-question").value;
    if (scope.includes("gold")) body.gold_csv = $("repair-gold").value;
    if (scope.includes("config")) body.config = JSON.parse($("repair-config").value);
    if (scope.includes("workspace")) {
      const f = $("repair-file").files[0];
      body.files = { [$("repair-path").value]: $("repair-delete").checked ? null : (f ? await fileB64(f) : "") };
    }
    const res = await api("POST", `/api/tasks/${state.task}/repair`, body);
    flash(`Version ${res.version} stored; the same reviewers recheck it.`);
    await openTask(state.task); await loadTasks();
  } catch (e) { $("repair-error").textContent = e.message; }
}

async function decide(what, body) {
  $("decision-error").textContent = "";
  try {
    await api("POST", `/api/tasks/${state.task}/${what}`, body);
    flash(`${what}: done`);
    await openTask(state.task); await loadTasks();
  } catch (e) { $("decision-error").textContent = e.message; }
}

async function showOverview() {
  show("task", false);
  const [status, stats] = await Promise.all([api("GET", "/api/status"), api("GET", "/api/stats")]);
  const box = $("overview");
  const a = stats.agreement, c = stats.acceptance;
  const pct = (x) => (x === null ? "-" : `${(100 * x).toFixed(1)}%`);
  box.replaceChildren(el("h3", {}, "Status"),
    tableOf(["task", "state", "version", "reviewers", "locked"], status.map((s) => [s.task_id, s.state, s.version, s.reviewers.join(", "), s.locked.join(", ")])),
    el("h3", {}, "Statistics (from the event log)"),
    tableOf(["measure", "value"], [
      ["verdict agreement", pct(a.verdict_agreement)], ["config agreement", pct(a.config_agreement)],
      ["first-pass consensus", pct(a.first_pass_consensus)], ["repairs", stats.repairs.repairs],
      ["accepted", c.accepted], ["accepted after repair", c.accepted_after_repair], ["removed", c.removed],
      ["issue flags", Object.entries(stats.issues.flags).map(([k, n]) => `${k} ${n}`).join(", ") || "-"]]));
  show("overview", true);
}

document.addEventListener("DOMContentLoaded", boot);

// DataSpace review console: a thin client of /api. Everything it may show or do is decided
// by the server; this page only lays it out. No external request, no inline script.
// Routes: #/inbox, #/task/<id>/<step>, #/overview. Drafts live in localStorage until submitted.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { me: null, vocab: null, tasks: [], task: null, view: null, files: [], filter: "all", gold: null, seq: 0 };
const FINAL = ["accepted", "removed"];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return node;
}

// ---- errors in the user's terms ----------------------------------------------------------
const FIELD_NAMES = [
  [/^result_csv: /, "Your answer table: "],
  [/^evidence\[(\d+)\]\.(\w+): /, (m, i, k) => `Evidence anchor ${Number(i) + 1} (${k === "anchor" ? "where" : k}): `],
  [/^evidence: /, "Evidence: "],
  [/^semantics: /, "Interpreted semantics: "],
  [/^confidence: /, "Confidence: "],
  [/^config\.columns\[(\d+)\]: /, (m, i) => `Config, column ${Number(i) + 1}: `],
  [/^config(\.\w+)*: /, "Config: "],
  [/^citations\[\d+\]\.path: /, "Citation: "],
  [/^citations: /, "Citation: "],
  [/^gold_csv: /, "Gold: "],
  [/^scope: /, "What the repair changes: "],
  [/^reason: /, "Reason: "],
  [/^text: /, "Message: "],
];

function userError(msg, status) {
  if (status === 401) return "Your session has ended; log in again.";
  if (status >= 500) return "Something went wrong on the server; try again, and tell an administrator if it persists.";
  let out = String(msg || "").replaceAll("<memory>", "").replace(/ \(see \/api\/vocabulary\)/, "");
  for (const [rx, name] of FIELD_NAMES) {
    if (rx.test(out)) { out = out.replace(rx, name); break; }
  }
  return out.replace(/\s+:/g, ":").trim();
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
    const err = new Error(userError(data && data.error, r.status));
    err.status = r.status;
    throw err;
  }
  return data;
}

function show(id, on) { $(id).classList.toggle("hidden", !on); }
function flash(text) { $("flash-text").textContent = text; show("flash", !!text); }
function clearErrors() { document.querySelectorAll("p.error").forEach((p) => { p.textContent = ""; }); }
// What the last action came to ("ok" once the page shows its result, "error" once the
// message is shown): scripts driving the page wait on it.
function settled(outcome) { document.body.dataset.action = outcome; }

function rowNumbered(header, rows, opts = {}) {
  // Every table shows its row numbers: 1 = the first data row (the header is not a row).
  const t = el("table", { class: "grid data" + (opts.onRow ? " clickable" : "") });
  t.append(el("thead", {}, el("tr", {}, el("th", { class: "rownum", title: "row number: 1 = the first data row" }, "# (1 = first data row)"),
    ...header.map((h, j) => el("th", { class: opts.diffCols && opts.diffCols.has(j) ? "diff" : "" }, h)))));
  const tb = el("tbody");
  const marked = new Set((opts.cells || []).map(([i, j]) => `${i}:${j}`));
  rows.forEach((r, i) => {
    const tr = el("tr", { "data-row": i + 1 }, el("td", { class: "rownum" }, i + 1),
      ...r.map((c, j) => el("td", { class: marked.has(`${i}:${j}`) ? "diff" : "" }, c === null ? "NULL" : c)));
    if (opts.onRow) tr.addEventListener("click", () => { opts.onRow(i + 1, tr); });
    tb.append(tr);
  });
  t.append(tb);
  return t;
}

function csvText(header, rows) {
  const q = (v) => { const s = v === null || v === undefined ? "" : String(v); return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s; };
  return [header, ...rows].map((r) => r.map(q).join(",")).join("\n") + "\n";
}

// ---- confirmation ------------------------------------------------------------------------
function confirmDialog({ title, text, warnings = [], ok }) {
  // Resolved by the buttons themselves (not the dialog's close event, which is queued and
  // could reach the next confirmation).
  const d = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-warnings").replaceChildren(...warnings.map((w) => el("li", {}, w)));
  show("confirm-warnings", warnings.length > 0);
  $("confirm-ok").textContent = ok;
  return new Promise((resolve) => {
    let open = true;
    const done = (answer) => { if (!open) return; open = false; d.close(); resolve(answer); };
    $("confirm-ok").onclick = () => done(true);
    $("confirm-cancel").onclick = () => done(false);
    d.oncancel = (ev) => { ev.preventDefault(); done(false); };
    d.showModal();
    $("confirm-ok").focus();
  });
}

// ---- drafts ---------------------------------------------------------------------------------
function draftKey(phase) {
  const v = state.view;
  return `dsreview:${state.me.name}:${state.task}:v${v.version}:${phase}`;
}
function saveDraft(phase) {
  if (!state.view || state.me.role !== "reviewer") return;
  const data = phase === "phase1" ? readPhase1() : readPhase2();
  try { localStorage.setItem(draftKey(phase), JSON.stringify(data)); } catch (e) { /* storage full or off: drafts are a convenience */ }
}
function loadDraft(phase) {
  try { return JSON.parse(localStorage.getItem(draftKey(phase)) || "null"); } catch (e) { return null; }
}
function dropDraft(phase) { try { localStorage.removeItem(draftKey(phase)); } catch (e) { /* ignore */ } }

// ---- boot and routing -------------------------------------------------------------------------
async function boot() {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("login-error").textContent = "";
    try {
      await api("POST", "/api/login", { name: $("login-name").value, password: $("login-password").value });
      await start();
    } catch (e) { $("login-error").textContent = e.status === 401 ? "Wrong user name or password." : e.message; }
  });
  $("logout").addEventListener("click", async () => {
    await api("POST", "/api/logout", {});
    history.replaceState(null, "", "/");
    location.reload();
  });
  $("flash-close").addEventListener("click", () => flash(""));
  $("help-btn").addEventListener("click", () => show("help", $("help").classList.contains("hidden")));
  $("phase1").addEventListener("submit", submitPhase1);
  $("phase2").addEventListener("submit", submitPhase2);
  $("phase1").addEventListener("input", () => saveDraft("phase1"));
  $("phase1").addEventListener("change", () => saveDraft("phase1"));
  $("phase2").addEventListener("input", () => { saveDraft("phase2"); verdictWarning(); });
  $("phase2").addEventListener("change", () => { saveDraft("phase2"); verdictWarning(); });
  $("message-form").addEventListener("submit", postMessage);
  $("repair").addEventListener("submit", submitRepair);
  $("repair-scope").addEventListener("change", repairScopeShown);
  $("add-evidence").addEventListener("click", () => addEvidence({}));
  $("accept-btn").addEventListener("click", () => decide("accept", {}, "Accept this task?", "The consensus version and its agreed config go into the release.", "Accept"));
  $("adjudicate-btn").addEventListener("click", () => decide("adjudicate",
    { reason: $("adjudicate-reason").value, messages: [...document.querySelectorAll("#adjudicate-messages input:checked")].map((c) => Number(c.value)) },
    "Accept the builder's version?", "The builder's config becomes the agreed one; the reason and the cited messages are recorded.", "Accept the builder's version"));
  $("reopen-btn").addEventListener("click", () => decide("reopen", { reason: $("reopen-reason").value },
    "Send back to phase 2?", "A new version with the same content; the same reviewers verify it again in phase 2.", "Send back"));
  $("remove-btn").addEventListener("click", () => decide("remove", { reason: $("remove-reason").value },
    "Remove this task?", "Removal is final: the task leaves the release, with your reason in the log.", "Remove"));
  $("assign-btn").addEventListener("click", () => decide("assign", { reviewer: $("assign-name").value }));
  $("next-task").addEventListener("click", () => { const t = nextActionable(); if (t) go(`#/task/${t}`); });
  $("prev-task").addEventListener("click", () => step(-1));
  $("next-in-task").addEventListener("click", () => step(1));
  document.addEventListener("keydown", onKey);
  window.addEventListener("hashchange", () => { route(); });
  try { await start(); } catch (e) { show("login-view", true); document.body.dataset.ready = "login"; }
}

async function start() {
  state.me = await api("GET", "/api/me");
  state.vocab = await api("GET", "/api/vocabulary");
  $("whoami").textContent = `${state.me.name} (${state.me.role})`;
  show("login-view", false); show("app", true); show("logout", true); show("help-btn", true); show("nav-inbox", true);
  show("show-status", state.me.role === "admin");
  buildStaticForms();
  await loadTasks();
  // a link to one task (the report's list of tasks no agent solved): #task_N
  const linked = /^#(task_\d+)$/.exec(location.hash);
  if (linked) history.replaceState(null, "", `#/task/${linked[1]}`);
  await route();
  document.body.dataset.ready = "1";
}

function go(hash) { if (location.hash === hash) route(); else location.hash = hash; }

async function route() {
  if (!state.me) return;
  const parts = (location.hash || "#/inbox").replace(/^#\/?/, "").split("/");
  try {
    if (parts[0] === "task" && /^task_\d+$/.test(parts[1] || "")) await openTask(parts[1]);
    else if (parts[0] === "overview" && state.me.role === "admin") await showOverview();
    else showInbox();
  } catch (e) {
    showInbox();
    flash("");
    $("inbox-progress").textContent = e.message;
  }
}

function buildStaticForms() {
  const v = state.vocab;
  $("p2-verdict").replaceChildren(el("option", { value: "" }, "— choose —"), ...v.verdicts.map((x) => el("option", { value: x }, x)));
  $("p2-disposition").replaceChildren(el("option", { value: "" }, "— choose —"), ...v.dispositions.map((x) => el("option", { value: x }, x.replaceAll("_", " "))));
  $("semantics").replaceChildren(...v.semantics_fields.map((f) =>
    el("label", {}, f + (f === "grain" ? " (required)" : ""), " ", el("input", { id: `sem-${f}`, "data-field": f }))));
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

// ---- inbox ------------------------------------------------------------------------------------
const REVIEWER_STEPS = [
  ["phase1", "Solve blind (phase 1)"], ["phase2", "Verify against the gold (phase 2)"], ["discussion", "Discuss (adjudication)"],
  ["waiting", "Waiting for others"], ["accepted", "Accepted"], ["removed", "Removed"]];
const ADMIN_STEPS = [
  ["adjudication", "Decide: adjudication"], ["consensus", "Decide: consensus"], ["recheck", "Recheck by reviewers"],
  ["in_review", "In review"], ["pending", "Waiting for reviewers"], ["accepted", "Accepted"], ["removed", "Removed"]];

function stepOf(t) { return state.me.role === "reviewer" ? t.todo : t.state; }
function actionable(t) {
  const s = stepOf(t);
  if (state.me.role === "reviewer") return ["phase1", "phase2", "discussion"].includes(s);
  if (state.me.role === "repairer") return s === "adjudication";
  return ["adjudication", "consensus"].includes(s);
}
function nextActionable(after) {
  const order = state.tasks.map((t) => t.task_id);
  const start = after ? order.indexOf(after) + 1 : 0;
  const rotated = [...state.tasks.slice(start), ...state.tasks.slice(0, start)];
  const t = rotated.find((x) => actionable(x) && x.task_id !== after);
  return t ? t.task_id : null;
}

async function loadTasks() {
  state.tasks = await api("GET", "/api/tasks");
  const done = state.tasks.filter((t) => !actionable(t)).length;
  $("progress-top").textContent = `${done} of ${state.tasks.length} done`;
}

function showInbox() {
  ["task", "overview"].forEach((id) => show(id, false));
  show("inbox", true);
  const steps = state.me.role === "reviewer" ? REVIEWER_STEPS : ADMIN_STEPS;
  const total = state.tasks.length;
  const todo = state.tasks.filter(actionable).length;
  $("inbox-progress").textContent = total ? `${todo} of your ${total} tasks wait for you; ${total - todo} done or with others.` : "No tasks are assigned to you yet.";
  $("inbox-bar").style.width = total ? `${(100 * (total - todo)) / total}%` : "0";
  const next = nextActionable();
  $("next-task").disabled = !next;
  $("next-hint").textContent = next ? `(${next}; or press n)` : "nothing waits for you";
  $("inbox-groups").replaceChildren(...steps.map(([key, label]) => {
    const items = state.tasks.filter((t) => stepOf(t) === key);
    if (!items.length) return el("span");
    return el("div", { class: "card inbox-group", "data-step": key }, el("h3", {}, `${label} `, el("span", { class: "muted count" }, `(${items.length})`)),
      el("ol", {}, ...items.map((t) => el("li", {}, el("a", { href: `#/task/${t.task_id}`, "data-task": t.task_id }, t.task_id),
        el("span", { class: "muted" }, ` · version ${t.version}${t.reviewers ? " · " + t.reviewers.join(", ") : ""}`)))));
  }));
  document.body.dataset.view = "inbox";
  document.body.dataset.task = "";
}

function step(dir) {
  const order = state.tasks.map((t) => t.task_id);
  const i = order.indexOf(state.task);
  const j = i + dir;
  if (j >= 0 && j < order.length) go(`#/task/${order[j]}`);
}

// ---- keyboard ---------------------------------------------------------------------------------
function onKey(ev) {
  if ($("confirm").open || !state.me) return;
  const typing = ev.target.closest && ev.target.closest("input, textarea, select");
  if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") {
    const form = ev.target.closest && ev.target.closest("form");
    const target = form && !form.classList.contains("hidden") ? form
      : ["phase1", "phase2"].map($).find((f) => !f.classList.contains("hidden"));
    if (target) { ev.preventDefault(); target.requestSubmit(); }
    return;
  }
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const inTask = !$("task").classList.contains("hidden");
  if (ev.key === "?") show("help", $("help").classList.contains("hidden"));
  else if (ev.key === "i") go("#/inbox");
  else if (ev.key === "n") {
    const t = inTask ? (nextActionable(state.task) || null) : nextActionable();
    if (t) go(`#/task/${t}`); else if (inTask) step(1);
  } else if (ev.key === "p" && inTask) step(-1);
  else if (ev.key === "a" && inTask) {
    const f = !$("phase1").classList.contains("hidden") ? $("p1-result") : $("p2-verdict");
    f.focus(); ev.preventDefault();
  } else if (/^[1-9]$/.test(ev.key) && inTask) {
    const link = document.querySelectorAll("#file-list a")[Number(ev.key) - 1];
    if (link) link.click();
  } else return;
  ev.preventDefault();
}

// ---- a task ------------------------------------------------------------------------------------
function stepName(v) {
  if (state.me.role === "reviewer") return v.todo;
  return v.state;
}

async function openTask(taskId) {
  const seq = ++state.seq;
  const other = state.task !== taskId;
  state.task = taskId;
  document.body.dataset.task = "";
  const v = await api("GET", `/api/tasks/${taskId}`);
  if (seq !== state.seq) return;
  state.view = v;
  ["inbox", "overview"].forEach((id) => show(id, false));
  show("task", true);
  history.replaceState(null, "", `#/task/${taskId}/${stepName(v)}`);
  const order = state.tasks.map((t) => t.task_id);
  $("task-pos").textContent = `${order.indexOf(taskId) + 1} of ${order.length}`;
  $("task-id").textContent = taskId;
  $("task-version").textContent = v.version;
  $("task-state").textContent = v.state.replace("_", " ");
  $("question").textContent = v.question;
  const todoText = { phase1: "your next step: phase1 — solve blind", phase2: "your next step: phase2 — verify against the gold",
    discussion: "your next step: discussion — the reviewers disagree", waiting: "waiting for the other reviewers" };
  $("todo").textContent = v.todo ? (todoText[v.todo] || v.todo) : (v.reviewers ? `reviewers: ${v.reviewers.join(", ")}` : "");
  $("versions").replaceChildren(...(v.versions || []).filter((x) => x.version > 1).map((x) =>
    el("p", { class: "muted" }, `version ${x.version}: ${x.scope.length ? "repaired " + x.scope.join(", ") : "sent back to phase 2"} by ${x.by} — ${x.reason}`)));
  if (other) { flash(""); state.filter = "all"; $("viewer").replaceChildren(el("p", { class: "muted" }, "Pick a file (or press its number).")); }
  const reviewer = state.me.role === "reviewer";
  const completed = reviewer ? (v.my || []).some((r) => r.phase2) : true;
  const seesGold = !reviewer || v.phase1_locked;
  const seesRecords = !reviewer || v.phase2_locked || completed;
  const seesDiscussion = !reviewer || v.phase2_locked;
  const changed = v.version > 1 && completed;
  state.gold = null;
  // Independent loads in parallel; what needs the gold or the ledger comes after.
  const files = (async () => {
    state.files = await api("GET", `/api/tasks/${taskId}/files`);
    renderFiles();
    if (other && state.files.length) await openFile(state.files[0]);
  })();
  const [, , diffOk, sqlOk, ledgerOk] = await Promise.all([files, seesGold ? loadGold() : null, changed ? loadDiff(v.version) : false,
    completed ? loadSql() : false, !reviewer ? loadLedger() : false, seesDiscussion ? loadMessages() : null]);
  if (seq !== state.seq) return;
  show("phase1", reviewer && v.todo === "phase1");
  if (reviewer && v.todo === "phase1") resetPhase1(loadDraft("phase1"));
  show("comparison", seesGold);
  show("phase2", reviewer && v.todo === "phase2");
  if (reviewer && v.todo === "phase2") {
    const draft = loadDraft("phase2");
    fillPhase2(draft);
    $("cfg-hint").textContent = draft ? "Your draft, kept in this browser." : "Suggested from the gold's values; check each column.";
  }
  show("diff-card", !!diffOk);
  const d = v.differences;
  show("why", !reviewer && v.state === "adjudication" && !!d);
  if (d) $("why-list").replaceChildren(...d.reasons.map((r) => el("li", {}, r)));
  show("warnings", !reviewer && (v.warnings || []).length > 0);
  $("warning-list").replaceChildren(...(v.warnings || []).map((w) => el("li", { class: "warn" }, w.text)));
  show("records", seesRecords);
  if (seesRecords) await loadRecords();
  show("sql-card", !!sqlOk);
  show("ledger-card", !!ledgerOk);
  show("discussion", seesDiscussion && ["adjudication", "consensus", "recheck", "accepted", "removed"].includes(v.state));
  show("message-form", !FINAL.includes(v.state));
  const exits = v.exits || [];
  show("repair", exits.includes("repair"));
  if (exits.includes("repair") && other) prefillRepair();
  show("decision", state.me.role === "admin");
  for (const x of ["accept", "adjudicate", "reopen", "remove"]) show(`exit-${x}`, exits.includes(x));
  show("assign-box", state.me.role === "admin" && ["pending", "in_review"].includes(v.state));
  $("decision-text").textContent = v.decision
    ? `${v.decision.decision}${v.decision.via ? " by " + v.decision.via : ""} by ${v.decision.by} at ${v.decision.at}${v.decision.reason ? ": " + v.decision.reason : ""}`
    : (v.agreed_config ? "Consensus: every reviewer matched, passed and wrote the same config." + ((v.warnings || []).length ? " But see the contradictions above." : "")
      : (v.state === "adjudication" ? "No consensus; the ways out are below." : "No decision yet."));
  document.body.dataset.view = "task";
  document.body.dataset.taskState = v.state;
  document.body.dataset.todo = v.todo || "";
  document.body.dataset.task = taskId;
}

function renderFiles() {
  const mods = ["all", ...new Set(state.files.map((f) => f.modality))];
  $("modality-filter").replaceChildren(...mods.map((m) => el("button", {
    type: "button", class: m === state.filter ? "on" : "", "data-modality": m,
    onclick: () => { state.filter = m; renderFiles(); } }, m)));
  const files = state.files.filter((f) => state.filter === "all" || f.modality === state.filter);
  $("file-list").replaceChildren(...files.map((f) => el("li", {},
    el("a", { href: "#", "data-path": f.path, onclick: (e) => { e.preventDefault(); openFile(f); } }, f.path),
    el("small", { class: "muted" }, ` ${f.modality}${f.overlay ? " · repaired" : ""}`))));
  $("msg-path").replaceChildren(el("option", { value: "question" }, "the question"),
    ...state.files.map((f) => el("option", { value: f.path }, f.path)));
}

function anchoring() { return !$("phase1").classList.contains("hidden"); }

function anchorHere(f, kind, anchor, fact) {
  if (!anchoring()) { flash("Anchors are added while you solve phase 1."); return null; }
  const row = addEvidence({ path: f.path, modality: f.modality, anchor_kind: kind, anchor, fact });
  row.querySelector(".ev-fact").focus({ preventScroll: true });
  return row;
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
      box.append(el("p", { class: "muted" }, `${tab.total} data rows${tab.rows.length < tab.total ? ` (first ${tab.rows.length} shown)` : ""}. Click a row to anchor evidence there.`),
        rowNumbered(tab.header, tab.rows, { onRow: (n, tr) => {
          const fact = tab.header.map((h, j) => `${h} ${tab.rows[n - 1][j]}`).join(", ");
          if (anchorHere(f, "row", String(n), fact)) tr.classList.add("anchored");
        } }));
    } else if (f.modality === "sqlite") {
      const ta = el("textarea", { id: "sql-input", rows: 3, spellcheck: "false" });
      ta.value = "SELECT name FROM sqlite_master WHERE type = 'table'";
      const out = el("div", { id: "sql-output" });
      let last = null;
      const use = el("button", { type: "button", id: "sql-use", disabled: true, onclick: () => {
        if (!last || !anchoring()) return;
        $("p1-result").value = csvText(last.header, last.rows);
        saveDraft("phase1");
        flash("The query result is now your answer table (phase 1); check it before locking.");
      } }, "Use this query result as my answer");
      const run = el("button", { type: "button", id: "sql-run", onclick: async () => {
        try {
          const res = await api("POST", `/api/tasks/${t}/sqlite`, { path: f.path, sql: ta.value });
          last = res;
          use.disabled = !anchoring() || res.truncated;
          out.replaceChildren(rowNumbered(res.header, res.rows), el("p", { class: "muted" }, res.truncated ? "first rows only (too many to use as an answer)" : `${res.rows.length} rows`));
        } catch (e) { last = null; use.disabled = true; out.replaceChildren(el("p", { class: "error" }, e.message)); }
      } }, "Run read-only query");
      const key = el("input", { id: "key-anchor", placeholder: "table.column=value", size: 24 });
      box.append(ta, el("div", {}, run, " ", use), out,
        el("div", {}, el("label", {}, "key ", key), el("button", { type: "button", class: "anchor-btn", onclick: () => anchorHere(f, "key", key.value) }, "Add key anchor")));
    } else if (f.modality === "markdown") {
      const md = await api("GET", `/api/tasks/${t}/markdown?path=${q}`);
      const div = el("div", { class: "markdown", id: "markdown-view", title: "Click a section to anchor evidence there" });
      div.innerHTML = md.html; // rendered by the server with raw HTML disabled
      div.addEventListener("click", (ev) => {
        let node = ev.target.closest("h1, h2, h3, h4, h5, h6") || ev.target.closest("#markdown-view > *");
        while (node && node !== div && !/^H[1-6]$/.test(node.tagName)) node = node.previousElementSibling;
        if (node && node !== div) anchorHere(f, "section", node.textContent.trim(), `section ${node.textContent.trim()}`);
      });
      box.append(el("p", { class: "muted" }, "Click a section to anchor evidence there."), div);
    } else if (f.modality === "pdf") {
      const info = await api("GET", `/api/tasks/${t}/pdf?path=${q}`);
      const img = el("img", { id: "pdf-page", alt: "PDF page", title: "Click the page to anchor evidence there" });
      const num = el("input", { id: "pdf-page-num", type: "number", min: 1, max: info.pages, value: 1 });
      const load = () => { img.src = `/api/tasks/${t}/pdf/page?path=${q}&page=${num.value}`; };
      num.addEventListener("change", load);
      img.addEventListener("click", () => anchorHere(f, "page", String(num.value)));
      box.append(el("label", {}, `page (of ${info.pages}) `, num),
        el("button", { type: "button", class: "anchor-btn", onclick: () => anchorHere(f, "page", String(num.value)) }, "Anchor this page"), el("div", {}, img));
      load();
    } else if (f.modality === "video") {
      const video = el("video", { id: "video-view", controls: "", preload: "metadata", src: `/api/tasks/${t}/file?path=${q}` });
      const ts = el("input", { id: "video-time", size: 8, value: "0" });
      const grab = el("button", { type: "button", id: "video-grab", onclick: () => {
        ts.value = video.currentTime.toFixed(2);
        anchorHere(f, "timestamp", ts.value);
      } }, "Use current time as an anchor");
      const seek = el("button", { type: "button", id: "video-seek", onclick: () => { video.currentTime = parseFloat(ts.value) || 0; } }, "Seek");
      box.append(video, el("div", {}, el("label", {}, "time (s) ", ts), seek, " ", grab));
    } else {
      box.append(el("a", { href: `/api/tasks/${t}/file?path=${q}`, download: f.path }, "download"));
    }
  } catch (e) { box.append(el("p", { class: "error" }, e.message)); }
  box.dataset.loaded = f.path;
}

// ---- phase 1 -------------------------------------------------------------------------------------
function resetPhase1(draft) {
  $("evidence-rows").replaceChildren();
  $("p1-error").textContent = "";
  const d = draft || {};
  $("p1-result").value = d.result_csv || "";
  for (const f of state.vocab.semantics_fields) $(`sem-${f}`).value = (d.semantics || {})[f] || "";
  document.querySelectorAll("#p1-issues input").forEach((c) => { c.checked = (d.issues || []).includes(c.value); });
  $("p1-confidence").value = String(d.confidence || 3);
  $("p1-rationale").value = d.rationale || "";
  for (const a of d.evidence || []) addEvidence(a, false);
}

function addEvidence(a, save = true) {
  const v = state.vocab;
  const row = el("tr", { class: "evidence" });
  const path = el("select", { class: "ev-path" }, ...state.files.map((f) => el("option", { value: f.path }, f.path)));
  const modality = el("input", { class: "ev-modality", readonly: "", size: 8, tabindex: "-1" });
  const setModality = () => { const f = state.files.find((x) => x.path === path.value); modality.value = f ? f.modality : ""; };
  path.addEventListener("change", setModality);
  const kind = el("select", { class: "ev-kind" }, ...v.anchor_kinds.map((k) => el("option", { value: k }, k)));
  const anchor = el("input", { class: "ev-anchor", size: 10 });
  const fact = el("input", { class: "ev-fact", placeholder: "what this shows" });
  const role = el("select", { class: "ev-role" }, ...v.evidence_roles.map((r) => el("option", { value: r }, r)));
  if (a.path) path.value = a.path;
  if (a.anchor_kind) kind.value = a.anchor_kind;
  if (a.role) role.value = a.role;
  anchor.value = a.anchor || "";
  fact.value = a.fact || "";
  setModality();
  row.append(el("td", {}, path), el("td", {}, modality), el("td", {}, kind), el("td", {}, anchor), el("td", {}, fact), el("td", {}, role),
    el("td", {}, el("button", { type: "button", title: "Remove this anchor", onclick: () => { row.remove(); saveDraft("phase1"); } }, "×")));
  $("evidence-rows").append(row);
  if (save) saveDraft("phase1");
  return row;
}

function checked(boxId) {
  return [...$(boxId).querySelectorAll("input[type=checkbox]:checked")].map((c) => c.value);
}

function readPhase1() {
  const evidence = [...document.querySelectorAll("#evidence-rows tr.evidence")].map((r) => ({
    path: r.querySelector(".ev-path").value, modality: r.querySelector(".ev-modality").value,
    anchor_kind: r.querySelector(".ev-kind").value, anchor: r.querySelector(".ev-anchor").value,
    fact: r.querySelector(".ev-fact").value, role: r.querySelector(".ev-role").value }));
  const semantics = {};
  for (const f of state.vocab.semantics_fields) { const x = $(`sem-${f}`).value.trim(); if (x) semantics[f] = x; }
  return { result_csv: $("p1-result").value, evidence, semantics, issues: checked("p1-issues"),
    confidence: parseInt($("p1-confidence").value, 10), rationale: $("p1-rationale").value };
}

async function submitPhase1(ev) {
  ev.preventDefault();
  const body = readPhase1();
  const rows = body.result_csv.trim() ? body.result_csv.trim().split("\n").length - 1 : 0;
  const sure = await confirmDialog({ title: "Lock your phase-1 answer?",
    text: `Your answer (${rows} data row${rows === 1 ? "" : "s"}) and ${body.evidence.length} evidence anchor(s) are locked for good; the gold is shown next.`,
    warnings: rows === 0 ? ["Your answer has no data rows. Lock an empty answer only if the question's answer is empty."] : [],
    ok: "Lock phase 1" });
  if (!sure) return;
  try {
    await api("POST", `/api/tasks/${state.task}/phase1`, body);
    dropDraft("phase1");
    clearErrors();
    flash("Phase 1 locked. Your answer is beside the gold below; verify it in phase 2.");
    await Promise.all([loadTasks(), openTask(state.task)]);
    settled("ok");
  } catch (e) { $("p1-error").textContent = e.message; settled("error"); }
}

// ---- gold, comparison, phase 2 ----------------------------------------------------------------------
async function loadGold() {
  const g = await api("GET", `/api/tasks/${state.task}/gold`);
  state.gold = g;
  $("gold-table").replaceChildren(rowNumbered(g.header, g.rows), el("p", { class: "muted" }, `${g.total} gold rows`));
  const d = g.diagnostic;
  show("answer-col", !!g.answer);
  $("comparison-title").textContent = g.answer ? "Your answer beside the gold" : "Gold";
  if (!d) {
    $("diag-summary").textContent = "";
    $("diag-rows").replaceChildren(); $("explain-list").replaceChildren(); $("answer-table").replaceChildren();
    return;
  }
  const v = d.verdict;
  $("diag-summary").textContent = v.passed
    ? `Your locked answer equals the gold (config used: ${d.config_used}).`
    : `Your locked answer differs: ${v.error_code} — ${v.error} (config used: ${d.config_used}).`;
  $("diag-summary").className = v.passed ? "" : "warn";
  $("explain-list").replaceChildren(...(v.passed ? [] : (g.explanation.summary || []).map((s) => el("li", {}, s))));
  $("answer-table").replaceChildren(rowNumbered(g.answer.header, g.answer.rows), el("p", { class: "muted" }, `${g.answer.rows.length} rows`));
  const rows = [...d.missing_rows.map((r) => ["missing from yours", ...r.cells]), ...d.extra_rows.map((r) => ["only in yours", ...r.cells])];
  const shapes = `gold ${d.gold_shape[0]} rows × ${d.gold_shape[1]} columns; yours ${d.candidate_shape[0]} × ${d.candidate_shape[1]}`;
  if (d.mapping === null) $("diag-rows").replaceChildren(el("p", {}, `The tables have different widths (${shapes}).`));
  else $("diag-rows").replaceChildren(el("p", { class: "muted" }, shapes), rows.length ? rowNumbered(["", ...g.header], rows) : el("p", { class: "muted" }, "no row differences"));
}

function suggestColumn(values) {
  const vals = values.filter((x) => x !== null && String(x).trim() !== "").map((x) => String(x).trim());
  if (!vals.length) return { type: "text" };
  if (vals.every((x) => /^-?\d+$/.test(x))) return { type: "number", comparison: { mode: "integer" } };
  if (vals.every((x) => /^-?\d*\.?\d+$/.test(x))) {
    const digits = Math.max(...vals.map((x) => (x.split(".")[1] || "").length));
    return { type: "number", comparison: { mode: "decimal_places", digits } };
  }
  if (vals.every((x) => /^\d{4}-\d{2}-\d{2}$/.test(x))) return { type: "date" };
  if (vals.every((x) => /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?$/.test(x))) return { type: "datetime" };
  return { type: "text" };
}

// One config editor for phase 2 and repairs: a row per gold column, no JSON to type.
function configEditor(box, header, config) {
  const ordered = el("input", { type: "checkbox", class: "cfg-ordered" });
  ordered.checked = !!(config && config.order_sensitive);
  const rows = header.map((h, j) => {
    const c = (config && config.columns && config.columns[j]) || { type: "text" };
    const type = el("select", { class: "cfg-type" }, ...["text", "number", "date", "datetime", "boolean"].map((t) => el("option", { value: t }, t)));
    const mode = el("select", { class: "cfg-mode" }, ...["integer", "decimal_places", "significant_digits"].map((m) => el("option", { value: m }, m.replace("_", " "))));
    const digits = el("input", { class: "cfg-digits", type: "number", min: 0, max: 30, size: 3 });
    const unit = el("select", { class: "cfg-unit" }, ...["plain", "percentage_points", "fraction"].map((u) => el("option", { value: u }, u.replace("_", " "))));
    const pct = el("input", { class: "cfg-percent", type: "checkbox" });
    type.value = c.type || "text";
    mode.value = (c.comparison && c.comparison.mode) || "integer";
    digits.value = c.comparison && c.comparison.digits !== undefined ? c.comparison.digits : 2;
    unit.value = c.unit || "plain";
    pct.checked = !!c.allow_percent_sign;
    const sync = () => {
      const num = type.value === "number";
      [mode, unit, pct].forEach((x) => { x.disabled = !num; });
      digits.disabled = !num || mode.value === "integer";
    };
    type.addEventListener("change", sync); mode.addEventListener("change", sync);
    sync();
    return el("tr", { class: "cfg", "data-col": h }, el("td", {}, h), el("td", {}, type), el("td", {}, mode), el("td", {}, digits), el("td", {}, unit), el("td", {}, pct));
  });
  box.replaceChildren(el("label", {}, ordered, " Row order is required by the question"),
    el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ...["Column", "Type", "Comparison", "Digits", "Unit", "% sign allowed"].map((x) => el("th", {}, x)))),
      el("tbody", {}, ...rows)));
}

function readConfig(box) {
  const columns = [...box.querySelectorAll("tr.cfg")].map((r) => {
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
  return { order_sensitive: box.querySelector(".cfg-ordered").checked, columns };
}

function fillPhase2(draft) {
  const g = state.gold;
  const d = draft || {};
  const suggested = { order_sensitive: false, columns: g.header.map((h, j) => suggestColumn(g.rows.map((r) => r[j]))) };
  configEditor($("p2-config"), g.header, d.config || suggested);
  // Suggested only when the evaluator finds the blind answer equal to the gold; otherwise
  // the reviewer chooses (an empty choice cannot be locked).
  const equal = !!(g.diagnostic && g.diagnostic.verdict.passed);
  $("p2-verdict").value = d.verdict || (equal ? "match" : "");
  $("p2-disposition").value = d.disposition || (equal ? "pass" : "");
  document.querySelectorAll("#p2-issues input").forEach((c) => { c.checked = (d.issues || []).includes(c.value); });
  $("p2-rationale").value = d.rationale || "";
  $("p2-error").textContent = "";
  verdictWarning();
}

function readPhase2() {
  return { verdict: $("p2-verdict").value, disposition: $("p2-disposition").value, config: readConfig($("p2-config")),
    issues: checked("p2-issues"), rationale: $("p2-rationale").value };
}

function verdictWarning() {
  const g = state.gold;
  const differs = g && g.diagnostic && !g.diagnostic.verdict.passed;
  const on = !!differs && $("p2-verdict").value === "match";
  $("p2-warning").textContent = on ? "Your own blind answer differs from the gold (see above), yet you chose match. Check before locking." : "";
  show("p2-warning", on);
}

async function submitPhase2(ev) {
  ev.preventDefault();
  const body = readPhase2();
  if (!body.verdict || !body.disposition) { $("p2-error").textContent = "Choose a verdict and a disposition."; settled("error"); return; }
  let warnings = [];
  try {
    warnings = (await api("POST", `/api/tasks/${state.task}/phase2/check`, body)).warnings.map((w) => w.text);
  } catch (e) { $("p2-error").textContent = e.message; settled("error"); return; }
  const sure = await confirmDialog({ title: "Lock your phase-2 verification?",
    text: `Verdict ${body.verdict}, disposition ${body.disposition.replaceAll("_", " ")}, and your config are locked for good.`,
    warnings, ok: warnings.length ? "Lock anyway" : "Lock phase 2" });
  if (!sure) return;
  try {
    const res = await api("POST", `/api/tasks/${state.task}/phase2`, body);
    dropDraft("phase2");
    clearErrors();
    flash(`Phase 2 locked; the task is now ${res.state.replace("_", " ")}.` + (res.warnings.length ? " The contradiction is recorded for the administrator." : "")
      + (nextActionable(state.task) ? " Press n for the next task." : ""));
    await Promise.all([loadTasks(), openTask(state.task)]);
    settled("ok");
  } catch (e) { $("p2-error").textContent = e.message; settled("error"); }
}

// ---- versions -----------------------------------------------------------------------------------------
async function loadDiff(version) {
  let d;
  try { d = await api("GET", `/api/tasks/${state.task}/diff?version=${version}`); } catch (e) { return false; }
  $("diff-title").textContent = `Changes from version ${d.from} to ${d.to}`;
  const parts = [el("p", {}, `${d.scope.length ? "Repaired " + d.scope.join(", ") : "Sent back to phase 2 with no content change"} by ${d.by}: ${d.reason}`)];
  const lines = (title, list) => el("div", {}, el("h4", {}, title), el("pre", { class: "diff" }, ...list.map((l) =>
    el("div", { class: l.startsWith("+") ? "diff-add" : l.startsWith("-") ? "diff-del" : "" }, l))));
  if (d.question) parts.push(lines("Question", d.question));
  if (d.gold) parts.push(lines("Gold", d.gold.filter((l) => !l.startsWith("@@"))));
  if (d.config.length) {
    const values = "before" in d.config[0];
    parts.push(el("h4", {}, "Config"), el("table", { class: "grid", id: "diff-config" },
      el("thead", {}, el("tr", {}, el("th", {}, "key"), ...(values ? [el("th", {}, "before"), el("th", {}, "after")] : []))),
      el("tbody", {}, ...d.config.map((c) => el("tr", {}, el("td", {}, c.key),
        ...(values ? [el("td", { class: "diff-del" }, JSON.stringify(c.before)), el("td", { class: "diff-add" }, JSON.stringify(c.after))] : [])))),
      ), values ? "" : el("p", { class: "muted" }, "These config keys changed; write your own values."));
  }
  if (d.files.length) parts.push(el("h4", {}, "Files"), el("ul", {}, ...d.files.map((f) => el("li", {}, f))));
  if (!d.question && !d.gold && !d.config.length && !d.files.length) parts.push(el("p", { class: "muted" }, "No content changed."));
  $("diff-body").replaceChildren(...parts);
  return true;
}

// ---- records, discussion, SQL, ledger, repair, decisions -----------------------------------------------
function configText(c) {
  if (!c) return "";
  return `${c.order_sensitive ? "ordered" : "unordered"}; ` + c.columns.map((x) => `${x.gold_name}: ${x.type}${x.comparison ? " " + x.comparison.mode + (x.comparison.digits !== undefined ? "(" + x.comparison.digits + ")" : "") : ""}`).join(", ");
}

async function loadRecords() {
  const res = await api("GET", `/api/tasks/${state.task}/records`);
  const v = state.view;
  const d = v.differences;
  const body = $("records-body");
  body.replaceChildren();
  for (const [version, recs] of Object.entries(res.records)) {
    const current = Number(version) === v.version && d;
    const t = el("table", { class: "grid records", "data-version": version });
    t.append(el("thead", {}, el("tr", {}, ...["reviewer", "answer rows", "confidence", "verdict", "disposition", "config", "issues"].map((h) => el("th", {}, h)))));
    const tb = el("tbody");
    for (const r of recs) {
      tb.append(el("tr", { "data-reviewer": r.reviewer }, el("td", {}, r.reviewer),
        el("td", {}, r.phase1 ? r.phase1.result.rows.length : "(earlier version)"), el("td", {}, r.phase1 ? r.phase1.confidence : ""),
        el("td", { class: current && d.verdicts_differ ? "diff verdict" : "verdict" }, r.phase2 ? r.phase2.verdict : "(open)"),
        el("td", { class: current && d.dispositions_differ ? "diff disposition" : "disposition" }, r.phase2 ? r.phase2.disposition.replaceAll("_", " ") : ""),
        el("td", { class: current && d.config_keys.length ? "diff" : "" }, r.phase2 ? configText(r.phase2.config) : ""),
        el("td", {}, [...(r.phase1 ? r.phase1.issues : []), ...(r.phase2 ? r.phase2.issues : [])].join(" "))));
    }
    t.append(tb);
    body.append(el("h4", {}, `version ${version}`), t);
  }
  if (!d) return;
  // config keys side by side, the differing ones marked
  const names = Object.keys(d.configs);
  const keys = [...new Set([...names.flatMap((n) => Object.keys(d.configs[n])), ...Object.keys(d.builder || {})])];
  const cols = [...names, ...(d.builder ? ["builder"] : [])];
  const val = (n, k) => JSON.stringify(n === "builder" ? d.builder[k] : d.configs[n][k]) ?? "—";
  body.append(el("h4", {}, "Configs of this version, key by key"), el("table", { class: "grid", id: "config-compare" },
    el("thead", {}, el("tr", {}, el("th", {}, "key"), ...cols.map((c) => el("th", {}, c)))),
    el("tbody", {}, ...keys.map((k) => el("tr", { class: d.config_keys.includes(k) ? "differs" : "", "data-key": k }, el("td", { class: d.config_keys.includes(k) ? "diff" : "" }, k),
      ...cols.map((c) => el("td", { class: d.config_keys.includes(k) && c !== "builder" ? "diff" : "" }, val(c, k))))))));
  // each blind answer with the cells that are not in the gold
  if (state.gold) {
    const answers = [];
    for (const [version, recs] of Object.entries(res.records)) {
      for (const r of recs) {
        if (!r.phase1) continue;
        if (Number(version) > v.version) continue;
        const cells = d.answer_cells[r.reviewer] || [];
        const missing = (d.missing_gold_rows || {})[r.reviewer] || [];
        const clean = !cells.length && !missing.length;
        answers.push(el("div", { class: "answer", "data-reviewer": r.reviewer },
          el("h4", {}, `${r.reviewer}'s blind answer (version ${version})${clean ? " — equals the gold" : cells.length ? " — cells not in the gold are marked" : ""}`),
          rowNumbered(r.phase1.result.header, r.phase1.result.rows, { cells }),
          missing.length ? el("p", { class: "warn missing" }, `Gold rows missing from ${r.reviewer}'s answer: ${missing.map((n) => `${n} (${state.gold.rows[n - 1].join(", ")})`).join("; ")}`) : ""));
      }
    }
    body.append(...answers);
  }
}

async function loadSql() {
  try {
    const res = await api("GET", `/api/tasks/${state.task}/sql`);
    $("source-sql").textContent = res.sql || "(the ledger has no SQL for this task)";
    return true;
  } catch (e) { return false; }
}

async function loadLedger() {
  try {
    const res = await api("GET", `/api/tasks/${state.task}/ledger`);
    state.ledger = res;
    $("ledger-body").textContent = JSON.stringify({ ledger: res.ledger, builder_config: res.candidate_config }, null, 2);
    return true;
  } catch (e) { return false; }
}

async function loadMessages() {
  let msgs = [];
  try { msgs = await api("GET", `/api/tasks/${state.task}/messages`); } catch (e) { msgs = []; }
  $("messages").replaceChildren(...msgs.map((m) => el("li", { class: "message", "data-id": m.id },
    el("strong", {}, `${m.actor} `), el("small", { class: "muted" }, m.at), el("div", {}, m.text),
    el("small", {}, (m.citations || []).map((c) => `↳ ${c.path}${c.anchor ? " @ " + c.anchor : ""}`).join("  ")))));
  $("adjudicate-messages").replaceChildren(...(msgs.length ? [el("p", { class: "muted" }, "Cite the messages your decision rests on:")] : []),
    ...msgs.map((m, i) => el("label", { class: "cite" }, el("input", { type: "checkbox", value: m.id, checked: true }), ` message ${i + 1} (${m.actor})`)));
}

async function postMessage(ev) {
  ev.preventDefault();
  try {
    await api("POST", `/api/tasks/${state.task}/messages`, { text: $("msg-text").value,
      citations: [{ path: $("msg-path").value, anchor: $("msg-anchor").value }] });
    $("msg-text").value = "";
    clearErrors();
    flash("Message posted.");
    await loadMessages();
    settled("ok");
  } catch (e) { $("msg-error").textContent = e.message; settled("error"); }
}

function repairScopeShown() {
  for (const s of state.vocab.repair_scopes) {
    document.querySelectorAll(`.scope-${s}`).forEach((x) => x.classList.toggle("hidden", !$(`scope-${s}`).checked));
  }
}

function prefillRepair() {
  const v = state.view;
  document.querySelectorAll("#repair-scope input").forEach((c) => { c.checked = false; });
  $("repair-reason").value = "";
  $("repair-question").value = v.question;
  if (state.gold) $("repair-gold").value = csvText(state.gold.header, state.gold.rows);
  const cfg = state.ledger ? state.ledger.candidate_config : null;
  if (state.gold) configEditor($("repair-config"), state.gold.header, cfg);
  repairScopeShown();
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
  if (!scope.length) { $("repair-error").textContent = "Tick what the repair changes."; return; }
  try {
    if (scope.includes("question")) body.question = $("repair-question").value;
    if (scope.includes("gold")) body.gold_csv = $("repair-gold").value;
    if (scope.includes("config")) body.config = readConfig($("repair-config"));
    if (scope.includes("workspace")) {
      const f = $("repair-file").files[0];
      body.files = { [$("repair-path").value]: $("repair-delete").checked ? null : (f ? await fileB64(f) : "") };
    }
  } catch (e) { $("repair-error").textContent = e.message; return; }
  const sure = await confirmDialog({ title: "Store a repaired version?", text: `A new version changes ${scope.join(", ")}; the same reviewers recheck it.`, ok: "Store version" });
  if (!sure) return;
  try {
    const res = await api("POST", `/api/tasks/${state.task}/repair`, body);
    clearErrors();
    flash(`Version ${res.version} stored; the same reviewers recheck it.`);
    await Promise.all([loadTasks(), openTask(state.task)]);
    settled("ok");
  } catch (e) { $("repair-error").textContent = e.message; settled("error"); }
}

async function decide(what, body, title, text, ok) {
  $("decision-error").textContent = "";
  if (title) {
    const sure = await confirmDialog({ title, text, warnings: (state.view.warnings || []).map((w) => w.text), ok });
    if (!sure) return;
  }
  try {
    await api("POST", `/api/tasks/${state.task}/${what}`, body);
    clearErrors();
    const done = { accept: "Accepted.", adjudicate: "Accepted with the builder's version.", reopen: "Sent back to phase 2.", remove: "Removed.", assign: "Assigned." };
    flash(`${state.task}: ${done[what] || "done"}`);
    await Promise.all([loadTasks(), openTask(state.task)]);
    settled("ok");
  } catch (e) { $("decision-error").textContent = e.message; settled("error"); }
}

async function showOverview() {
  show("task", false); show("inbox", false);
  const [status, stats] = await Promise.all([api("GET", "/api/status"), api("GET", "/api/stats")]);
  const box = $("overview");
  const a = stats.agreement, c = stats.acceptance;
  const pct = (x) => (x === null ? "-" : `${(100 * x).toFixed(1)}%`);
  const plain = (h, rows) => { const t = rowNumbered(h, rows); return t; };
  box.replaceChildren(el("h3", {}, "Status"),
    plain(["task", "state", "version", "reviewers", "locked"], status.map((s) => [s.task_id, s.state, s.version, s.reviewers.join(", "), s.locked.join(", ")])),
    el("h3", {}, "Statistics (from the event log)"),
    plain(["measure", "value"], [
      ["verdict agreement", pct(a.verdict_agreement)], ["config agreement", pct(a.config_agreement)],
      ["first-pass consensus", pct(a.first_pass_consensus)], ["repairs", stats.repairs.repairs], ["sent back to phase 2", stats.repairs.reopened_for_phase2],
      ["accepted", c.accepted], ["accepted after repair", c.accepted_after_repair], ["accepted by adjudication", c.accepted_by_adjudication], ["removed", c.removed],
      ["issue flags", Object.entries(stats.issues.flags).map(([k, n]) => `${k} ${n}`).join(", ") || "-"]]));
  show("overview", true);
  document.body.dataset.view = "overview";
}

document.addEventListener("DOMContentLoaded", boot);

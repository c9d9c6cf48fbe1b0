// The catalogue page of `kubectl packline ui`. Plain JavaScript, no build
// step. Everything it shows comes from the page's own JSON endpoints
// (relative URLs, under the session's token); every check is the plugin's
// own, done by the server with the user's kubeconfig. Text from the
// cluster is only ever set with textContent, never as HTML.
"use strict";

const csrf = document.querySelector('meta[name="packline-csrf"]').content;
let templates = [];
let current = null; // the selected template
let validateTimer = null;
let validateSeq = 0;
const openDetails = new Set();

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Packline-CSRF": csrf },
    body: JSON.stringify(body),
  });
  let data = {};
  try { data = await r.json(); } catch (e) { data = { errors: [{ field: "", message: r.status + " " + r.statusText }] }; }
  return { status: r.status, data };
}

async function get(path) {
  const r = await fetch(path);
  const data = await r.json();
  if (!r.ok && !data.errors) throw new Error(r.status + " " + r.statusText);
  return data;
}

// ---- template cards ----

async function loadTemplates() {
  const cards = document.getElementById("cards");
  let data;
  try { data = await get("api/templates"); } catch (e) { cards.textContent = "Cannot list templates: " + e.message; return; }
  if (data.errors) { cards.textContent = data.errors.map((x) => x.message).join("\n"); return; }
  templates = data.templates;
  cards.textContent = "";
  const mine = templates.filter((t) => t.claimable);
  const others = templates.filter((t) => !t.claimable);
  if (mine.length === 0) cards.append(el("p", { class: "muted", text: "No template may be claimed here by you." }));
  for (const t of mine) {
    const card = el("button", { type: "button", class: "card", "data-template": t.name },
      el("h3", {}, t.name + " ", el("span", { class: "badge " + (t.ready === "True" ? "True" : t.ready.startsWith("False") ? "False" : "Unknown"), text: "Ready " + t.ready })),
      el("dl", {},
        el("dt", { text: "values" }), el("dd", { text: t.values && t.values.length ? t.values.join(", ") : "none" }),
        el("dt", { text: "exposures" }), el("dd", { text: t.exposures.join(", ") }),
        t.private ? el("dt", { text: "preview" }) : null, t.private ? el("dd", { text: "not here: a private repository" }) : null));
    card.addEventListener("click", () => select(t.name));
    cards.append(card);
  }
  const det = document.getElementById("unclaimable");
  det.hidden = others.length === 0;
  document.getElementById("unclaimable-count").textContent = others.length;
  const ul = document.getElementById("unclaimable-list");
  ul.textContent = "";
  for (const t of others) ul.append(el("li", { "data-template": t.name }, el("strong", { text: t.name }), ": " + (t.why || []).join("; ")));
}

// ---- the form ----

// leaves flattens a values schema into its inputs: objects with
// properties open up, anything else is one input.
function leaves(schema, path, required, out) {
  const props = (schema && schema.properties) || {};
  const req = new Set((schema && schema.required) || []);
  for (const name of Object.keys(props).sort()) {
    const s = props[name] || {};
    const p = path.concat([name]);
    const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (types.includes("object") && s.properties) leaves(s, p, req.has(name) && required, out);
    else out.push({ path: p, schema: s, types, required: req.has(name) && required });
  }
  return out;
}

function fieldName(path) { return "spec.values." + path.join("."); }

function inputFor(leaf) {
  const s = leaf.schema;
  const id = "v-" + leaf.path.join("-");
  const attrs = { id, "data-field": fieldName(leaf.path), "data-path": JSON.stringify(leaf.path), autocomplete: "off" };
  let input;
  if (Array.isArray(s.enum) && s.enum.length) {
    input = el("select", attrs, el("option", { value: "", text: leaf.required ? "choose…" : "(default)" }), ...s.enum.map((v) => el("option", { value: String(v), text: String(v) })));
  } else if (leaf.types.length === 1 && leaf.types[0] === "boolean") {
    input = el("select", attrs, el("option", { value: "", text: "(default)" }), el("option", { value: "true", text: "true" }), el("option", { value: "false", text: "false" }));
  } else if (leaf.types.includes("array") || leaf.types.includes("object")) {
    input = el("textarea", Object.assign(attrs, { rows: 3, placeholder: "YAML or JSON" }));
  } else {
    // Numbers are typed as text: the server types them with the schema,
    // and names the field when the text is not a number.
    input = el("input", Object.assign(attrs, { type: "text", inputmode: leaf.types.includes("integer") || leaf.types.includes("number") ? "numeric" : undefined }));
  }
  if (input.tagName !== "SELECT") {
    if (s.default !== undefined) input.placeholder = "default: " + JSON.stringify(s.default);
    else if (Array.isArray(s.examples) && s.examples.length) input.placeholder = "e.g. " + JSON.stringify(s.examples[0]);
  }
  const typeText = Array.isArray(s.enum) ? "one of " + s.enum.join(", ") : leaf.types.join(" or ") || "any";
  const help = [typeText, leaf.required ? "required" : "", s.minimum !== undefined ? "≥ " + s.minimum : "", s.maximum !== undefined ? "≤ " + s.maximum : "", s.description || ""].filter(Boolean).join(" · ");
  return el("div", { class: "field" },
    el("label", { for: id, text: leaf.path.join(".") + (leaf.required ? " *" : "") }),
    input,
    el("div", { class: "help", text: help }),
    el("div", { class: "field-error", "data-for": fieldName(leaf.path) }));
}

function select(name) {
  current = templates.find((t) => t.name === name);
  if (!current) return;
  for (const c of document.querySelectorAll(".card")) c.classList.toggle("selected", c.dataset.template === name);
  document.getElementById("claim").hidden = false;
  document.getElementById("claim-template").textContent = name;
  document.getElementById("preview-box").hidden = true;
  const vf = document.getElementById("values-fields");
  vf.textContent = "";
  const ls = current.schema ? leaves(current.schema, [], true, []) : [];
  if (ls.length === 0) vf.append(el("p", { class: "muted", text: "This template takes no values." }));
  for (const l of ls) vf.append(inputFor(l));
  const ex = document.getElementById("f-exposure");
  ex.textContent = "";
  for (const x of current.exposures) ex.append(el("option", { value: x, text: x }));
  updateHost();
  showErrors([]);
  document.getElementById("form-state").textContent = "";
  document.getElementById("f-name").focus();
}

function updateHost() {
  document.getElementById("host-field").hidden = document.getElementById("f-exposure").value !== "Ingress";
}

function formRequest() {
  const values = [];
  for (const i of document.querySelectorAll("#values-fields [data-path]")) {
    if (i.value.trim() === "") continue;
    values.push({ path: JSON.parse(i.dataset.path), raw: i.value });
  }
  return {
    template: current.name,
    name: document.getElementById("f-name").value.trim(),
    values,
    exposure: document.getElementById("f-exposure").value,
    host: document.getElementById("f-exposure").value === "Ingress" ? document.getElementById("f-host").value.trim() : "",
    tag: document.getElementById("f-tag").value.trim(),
    plainHTTP: document.getElementById("f-plain-http").checked,
  };
}

// showErrors puts each error under the input of its field, or in the
// form's general box when no input has that field.
function showErrors(errors) {
  for (const d of document.querySelectorAll(".field-error")) d.textContent = "";
  for (const i of document.querySelectorAll("#claim-form .invalid")) i.classList.remove("invalid");
  const general = document.getElementById("form-errors");
  general.textContent = "";
  const rest = [];
  for (const e of errors || []) {
    const box = e.field ? document.querySelector('.field-error[data-for="' + CSS.escape(e.field) + '"]') : null;
    if (!box) { rest.push(e.message); continue; }
    box.append(el("div", { text: e.message }));
    const input = document.querySelector('#claim-form [data-field="' + CSS.escape(e.field) + '"]');
    if (input) input.classList.add("invalid");
  }
  general.textContent = rest.join("\n");
  document.getElementById("claim-form").dataset.valid = errors && errors.length ? "false" : "true";
}

function scheduleValidate() {
  clearTimeout(validateTimer);
  document.getElementById("claim-form").dataset.valid = "pending";
  validateTimer = setTimeout(validate, 250);
}

async function validate() {
  if (!current) return;
  const seq = ++validateSeq;
  const r = await post("api/validate", formRequest());
  if (seq !== validateSeq) return; // a newer check is on its way
  showErrors(r.data.errors);
}

async function preview() {
  const btn = document.getElementById("preview-button");
  btn.disabled = true;
  document.getElementById("form-state").textContent = "Rendering…";
  try {
    const r = await post("api/preview", formRequest());
    if (r.status !== 200) { showErrors(r.data.errors); document.getElementById("form-state").textContent = "Not rendered: see above."; return; }
    showErrors([]);
    document.getElementById("preview-box").hidden = false;
    document.getElementById("preview-header").textContent = r.data.header;
    const note = document.getElementById("preview-note");
    note.hidden = !r.data.note;
    note.textContent = r.data.note ? "Note: " + r.data.note : "";
    document.getElementById("preview").textContent = r.data.files.map((f) => "# " + f.name + "\n" + f.data.replace(/\n$/, "")).join("\n---\n") + "\n";
    document.getElementById("form-state").textContent = "Rendered " + r.data.files.length + " files.";
  } finally { btn.disabled = false; }
}

async function create() {
  const btn = document.getElementById("create-button");
  btn.disabled = true;
  try {
    const r = await post("api/claims", formRequest());
    if (r.status !== 201) { showErrors(r.data.errors); document.getElementById("form-state").textContent = "Not created: see above."; return; }
    showErrors([]);
    document.getElementById("form-state").textContent = "Created Claim " + r.data.created + ": its status is below.";
    await poll();
  } finally { btn.disabled = false; }
}

// ---- live status ----

function human(n) {
  if (typeof n !== "number" || !isFinite(n)) return String(n);
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
}

function pick(o, names) {
  for (const n of names) if (o[n] !== undefined && o[n] !== null) return o[n];
  return undefined;
}

function toNumber(v) {
  if (typeof v === "number") return v;
  if (typeof v === "string" && v.trim() !== "" && !isNaN(Number(v))) return Number(v);
  return undefined;
}

// progressNode shows status.progress whatever its exact shape: bytes done
// and total as a bar, a rate, and any other fields as they are.
function progressNode(p) {
  if (p === undefined || p === null) return null;
  if (typeof p !== "object") return el("span", { class: "progress-text", text: String(p) });
  const done = toNumber(pick(p, ["bytesDone", "doneBytes", "completedBytes", "bytes", "done", "current"]));
  const total = toNumber(pick(p, ["bytesTotal", "totalBytes", "total"]));
  const rate = toNumber(pick(p, ["bytesPerSecond", "rateBytesPerSecond", "rate"]));
  const used = new Set(["bytesDone", "doneBytes", "completedBytes", "bytes", "done", "current", "bytesTotal", "totalBytes", "total", "bytesPerSecond", "rateBytesPerSecond", "rate"]);
  const span = el("span", { class: "progress-text" });
  const parts = [];
  if (done !== undefined) parts.push(human(done) + (total ? " / " + human(total) : ""));
  if (rate !== undefined) parts.push(human(rate) + "/s");
  for (const [k, v] of Object.entries(p)) if (!used.has(k)) parts.push(k + ": " + (typeof v === "object" ? JSON.stringify(v) : v));
  span.textContent = parts.join(" · ");
  const wrap = el("span", { class: "progress" });
  if (done !== undefined && total) wrap.append(el("progress", { value: String(done), max: String(total) }), " ");
  wrap.append(span);
  return wrap;
}

function readyNode(run, key) {
  const td = el("td", { class: "ready" }, el("span", { class: "badge " + (["True", "False"].includes(run.ready) ? run.ready : "Unknown"), text: run.ready }));
  if (run.ready !== "True" && (run.reason || run.message)) td.append(el("span", { class: "why", text: [run.reason, run.message].filter(Boolean).join(": ") }));
  if (run.conditions.length) {
    const d = el("details", { "data-key": key }, el("summary", { text: "conditions" }),
      el("ul", {}, ...run.conditions.map((c) => el("li", { text: c.type + "=" + c.status + " " + (c.reason || "") + (c.message ? ": " + c.message : "") }))));
    d.open = openDetails.has(key);
    d.addEventListener("toggle", () => (d.open ? openDetails.add(key) : openDetails.delete(key)));
    td.append(d);
  }
  return td;
}

function stepNode(run) {
  const td = el("td", { class: "progress-cell" });
  if (run.step) td.append(el("span", { class: "step", text: run.step }), " ");
  const p = progressNode(run.progress);
  if (p) td.append(p);
  if (!td.childNodes.length) td.textContent = run.phase === "Succeeded" ? "done" : "—";
  return td;
}

function deliveryNode(run) {
  const td = el("td", { class: "delivery" });
  if (!run.delivery) { td.textContent = "—"; return td; }
  for (const o of run.delivery.objects) td.append(el("div", { text: o.kind + " " + o.name + ": Ready=" + o.ready + (o.ready !== "True" && o.message ? " (" + o.message + ")" : "") }));
  const rev = run.delivery.status.lastAppliedRevision;
  if (rev) td.append(el("div", { class: "why", title: rev, text: "applied " + (rev.length > 24 ? rev.slice(0, 23) + "…" : rev) }));
  if (!td.childNodes.length) td.textContent = "pending";
  return td;
}

function renderClaims(runs) {
  const tb = document.querySelector("#claims tbody");
  tb.textContent = "";
  if (!runs.length) tb.append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No Claim in this namespace yet." })));
  for (const r of runs) {
    tb.append(el("tr", { "data-claim": r.name, "data-ready": r.ready, "data-phase": r.phase },
      el("td", { class: "name", text: r.name }), el("td", { text: r.template }), el("td", { class: "phase", text: r.phase || "—" }),
      readyNode(r, "claim/" + r.name), stepNode(r), deliveryNode(r), el("td", { class: "reference" }, el("code", { text: r.reference || "—" }))));
  }
}

function renderArtifacts(runs) {
  const tb = document.querySelector("#artifacts tbody");
  tb.textContent = "";
  if (!runs.length) tb.append(el("tr", {}, el("td", { colspan: 5, class: "muted", text: "No Artifact in this namespace." })));
  for (const r of runs) {
    tb.append(el("tr", { "data-artifact": r.name, "data-ready": r.ready, "data-phase": r.phase },
      el("td", { class: "name", text: r.name }), el("td", { class: "phase", text: r.phase || "—" }),
      readyNode(r, "artifact/" + r.name), stepNode(r), el("td", { class: "reference" }, el("code", { text: r.reference || "—" }))));
  }
}

async function poll() {
  try {
    const s = await get("api/status");
    renderClaims(s.claims || []);
    renderArtifacts(s.artifacts || []);
    document.getElementById("problems").textContent = (s.problems || []).join("\n");
  } catch (e) {
    document.getElementById("problems").textContent = "Cannot read status: " + e.message + " (is kubectl packline ui still running?)";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("claim-form");
  form.addEventListener("input", scheduleValidate);
  form.addEventListener("change", scheduleValidate);
  form.addEventListener("submit", (e) => e.preventDefault());
  document.getElementById("f-exposure").addEventListener("change", updateHost);
  document.getElementById("preview-button").addEventListener("click", preview);
  document.getElementById("create-button").addEventListener("click", create);
  loadTemplates();
  pollLoop();
});

// pollLoop reads status every 2 s after the last read ended: a slow API
// server never gets a second round of the user's reads on top of one
// still in flight.
async function pollLoop() {
  await poll();
  setTimeout(pollLoop, 2000);
}

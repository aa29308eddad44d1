// actorflow-console's web page (index.html): its tables, charts, logs,
// alerts and topology, from the console's /events, /api/history,
// /api/logs, /api/actor_history and /api/trace (apps/console/web_ui.hpp).
"use strict";
const keep = 600;       // points per chart at most: seeded history, then live samples
const seedKeep = 400;   // seeded points at most (longer histories are averaged down)
const actorKeep = 300;  // points per actor kept from the live documents
const hist = { t: [], series: {} };  // series[chart][key] = values, one per hist.t
let updates = 0;
let nowUs = Date.now() * 1000;       // the console's clock, from the last document
let lastDoc = null;

const short = task => {
  const m = /\/job:([^/]+)\/replica:\d+\/task:(\d+)/.exec(task);
  return m ? m[1] + "/" + m[2] : task;
};
const jobOf = task => (/\/job:([^/]+)/.exec(task) || [, task])[1];
const fmt = (x, d = 0) => (x === undefined || x === null) ? "-" : Number(x).toFixed(d);
const esc = s => String(s ?? "").replace(/[&<>"']/g, c =>
  ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"})[c]);
const pad = n => String(n).padStart(2, "0");
function clock(us) {
  if (!(us > 0)) return "-";
  const d = new Date(us / 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
function span(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
  return Math.floor(s / 3600) + "h " + pad(Math.floor(s / 60) % 60) + "m";
}
const ago = us => us > 0 ? span((nowUs - us) / 1e6) : "-";
const linkName = l => l.peer_task ? short(l.peer_task) : l.peer;

function fill(id, rows) {
  document.querySelector("#" + id + " tbody").innerHTML = rows.join("");
}

// -- tables ----------------------------------------------------------------

function tables(doc) {
  const up = doc.tasks.filter(t => t.state === "up" && t.node);
  const status = document.getElementById("status");
  let text = `${doc.tasks.length} tasks, ${up.length} up; update ${updates}`;
  // The console's verdict; without one, no active alert and every task up.
  const healthy = doc.healthy ?? (doc.alerts ? !(doc.alerts.active || []).length
    && doc.tasks.every(t => t.state === "up" && !t.stale) : undefined);
  if (healthy !== undefined)
    text += ` · <span id="health" class="${healthy ? "healthy" : "unhealthy"}">${healthy ? "healthy" : "unhealthy"}</span>`;
  if (doc.replay)
    text += ` · <span class="replay" id="replay">${doc.replay.ended ? "replayed" : "replaying"} ` +
            `${esc(doc.replay.file)} ${doc.replay.ended ? "to" : "at"} ${clock(doc.replay.position_us)}` +
            (doc.replay.speed && !doc.replay.ended ? ` (${esc(doc.replay.speed)}×)` : "") + "</span>";
  status.innerHTML = text;
  fill("tasks", doc.tasks.map(t => {
    // A task that is not up shows its last-known values, greyed.
    const n = t.node || t.last_node;
    const p = n ? n.process : {};
    const cls = t.state === "down" ? "down" : t.stale ? "stale" : "";
    const state = t.stale ? `stale since ${ago(t.updated_us)}` : t.state;
    const why = esc(t.error || "") + (t.last_error
      ? `<div>then: ${esc(t.last_error)}</div>` : "");
    return `<tr class="${cls}" data-task="${esc(t.task)}" data-state="${t.stale ? "stale" : esc(t.state)}">
      <td class="l">${esc(t.task)}</td><td class="l">${esc(t.address)}</td>
      <td class="l">${state}</td><td>${ago(t.since_us)}</td>
      <td>${t.state === "up" && !t.stale && t.rtt_us >= 0 ? fmt(t.rtt_us) : "-"}</td>
      <td class="last">${n ? n.actors.length : "-"}</td>
      <td class="last">${p.rss_bytes ? fmt(p.rss_bytes / 1e6, 1) : "-"}</td>
      <td class="last">${p.cpu_seconds !== undefined ? fmt(p.cpu_seconds, 1) : "-"}</td>
      <td class="l why">${why}</td></tr>`;
  }));
  const masters = up.filter(t => t.node.steps.total > 0);
  fill("steps", masters.map(t => {
    const s = t.node.steps;
    const last = s.last_errors.length ? s.last_errors[s.last_errors.length - 1] : null;
    return `<tr><td class="l">${esc(t.task)}</td><td>${s.total}</td><td>${fmt(s.per_s, 1)}</td>
      <td>${fmt(s.p50_us)}</td><td>${fmt(s.p99_us)}</td><td>${s.errors}</td>
      <td class="l">${last ? esc(last.code + ": " + last.message) : ""}</td></tr>`;
  }));
  // A trainer that finished or died keeps its last progress, greyed.
  const progress = doc.tasks.flatMap(t => (t.node || t.last_node || {training: []}).training
    .map(p => ({...p, past: !t.node || t.stale})));
  fill("training", progress.map(p =>
    `<tr class="${p.past ? "past" : ""}"><td class="l">${esc(p.task)}</td><td>${p.global_step}</td><td>${fmt(p.loss, 4)}</td>
     <td>${fmt(p.examples_per_sec)}</td><td>${p.accuracy >= 0 ? fmt(p.accuracy, 4) : "-"}</td></tr>`));
  // Every actor, with the task whose document lists it (`host`).
  actorList = up.flatMap(t => t.node.actors.map(a => ({...a, host: t.task})));
  fill("queues", actorList.filter(a => a.kind === "queue").map(a =>
    `<tr><td class="l">${short(a.host)}</td><td class="l">${esc(a.name)}</td><td>${a.gauges.size}</td>
     <td>${a.gauges.capacity < 0 ? "∞" : a.gauges.capacity}</td>
     <td class="l">${a.gauges.closed ? "yes" : "no"}</td><td>${a.gauges.blocked_enqueues}</td>
     <td>${a.gauges.blocked_dequeues}</td><td>${a.gauges.withdrawn}</td>
     <td>${a.gauges.returned}</td></tr>`));
  fill("variables", actorList.filter(a => a.kind === "variable").map(a =>
    `<tr><td class="l">${short(a.host)}</td><td class="l">${esc(a.name)}</td>
     <td class="l">${esc(a.detail)}</td><td>${a.gauges.bytes}</td><td>${a.gauges.updates}</td>
     <td>${fmt(a.updates_per_s, 1)}</td></tr>`));
  const select = document.getElementById("trace-task");
  const names = masters.map(t => t.task);
  if (select.dataset.names !== names.join()) {
    const chosen = select.value;
    select.innerHTML = names.map(n => `<option${n === chosen ? " selected" : ""}>${esc(n)}</option>`).join("");
    select.dataset.names = names.join();
  }
}

// -- alerts ------------------------------------------------------------------

function alerts(doc) {
  const el = document.getElementById("alerts");
  if (!doc.alerts) { el.hidden = true; return; }
  el.hidden = false;
  const active = doc.alerts.active || [], recent = (doc.alerts.recent || []).slice();
  recent.sort((x, y) => (y.cleared_us ?? 0) - (x.cleared_us ?? 0));
  el.dataset.active = active.length;
  el.dataset.recent = recent.length;
  const item = (a, state, when) =>
    `<div class="alert ${state}" data-rule="${esc(a.rule)}" data-task="${esc(a.task)}" data-state="${state}">` +
    `<span class="when">${when}</span><b>${esc(a.rule)}</b> ` +
    // The task's short name, unless the message names it.
    `${String(a.message ?? "").includes(a.task) ? "" : esc(short(a.task)) + ": "}${esc(a.message)}</div>`;
  let html = active.map(a => item(a, "active",
    `since ${clock(a.fired_us)} (${ago(a.fired_us)})`)).join("");
  if (!active.length)
    html += `<div class="alert ok">no active alerts${doc.healthy === false ? " (not healthy)" : ""}</div>`;
  html += recent.slice(0, 8).map(a => item(a, "cleared",
    `fired ${clock(a.fired_us)}, cleared ${clock(a.cleared_us)}`)).join("");
  if (recent.length > 8)
    html += `<div class="alert cleared">… and ${recent.length - 8} more cleared</div>`;
  el.innerHTML = html;
}

// -- topology ------------------------------------------------------------------

// One entry per pair of tasks that talk: the console's, or (older consoles)
// from the tasks' CAF peers and tensor channel links.
function edgesOf(doc) {
  if (Array.isArray(doc.topology)) return doc.topology;
  const pairs = new Map();
  const pair = (x, y) => {
    const [a, b] = x < y ? [x, y] : [y, x];
    const k = a + "\n" + b;
    if (!pairs.has(k))
      pairs.set(k, {a, b, caf_up: null, bytes_per_s_ab: null, bytes_per_s_ba: null, channel_up: null});
    return pairs.get(k);
  };
  for (const t of doc.tasks) {
    if (!t.node) continue;
    for (const p of t.node.peers || [])
      if (p.peer && p.peer.startsWith("/job:")) pair(t.task, p.peer).caf_up = !!p.up;
    for (const l of t.node.channel || []) {
      if (!l.peer_task || l.direction !== "out") continue;
      const e = pair(t.task, l.peer_task);
      e[t.task === e.a ? "bytes_per_s_ab" : "bytes_per_s_ba"] = l.bytes_per_s ?? null;
      e.channel_up = (e.channel_up ?? true) && !!l.up;
    }
  }
  return [...pairs.values()];
}

const edgeState = e => (e.caf_up === false || e.channel_up === false) ? "down"
  : (e.caf_up === null && e.channel_up === null) ? "unknown" : "up";
const mbs = x => (x === null || x === undefined) ? "-" : fmt(x / 1e6, 1);

function topology(doc) {
  const edges = edgesOf(doc);
  const state = {};
  for (const t of doc.tasks) state[t.task] = t.stale ? "stale" : t.state;
  const names = [...new Set([...doc.tasks.map(t => t.task), ...edges.flatMap(e => [e.a, e.b])])];
  // Columns by job (ps first), tasks in order down each column.
  const jobs = [...new Set(names.map(jobOf))].sort((x, y) =>
    (x !== "ps") - (y !== "ps") || x.localeCompare(y));
  const columns = jobs.map(j => names.filter(n => jobOf(n) === j)
    .sort((x, y) => x.localeCompare(y, undefined, {numeric: true})));
  const colGap = jobs.length > 1 ? Math.max(220, Math.min(280, 700 / (jobs.length - 1))) : 0;
  const rowGap = 64, top = 34, left = 70;
  const most = Math.max(1, ...columns.map(c => c.length));
  const height = top + (most - 1) * rowGap + 34;
  // Room right of the last column for the curves between its tasks.
  const lastJob = jobs[jobs.length - 1];
  const inLast = edges.some(e => jobOf(e.a) === lastJob && jobOf(e.b) === lastJob);
  const width = left * 2 + colGap * (jobs.length - 1) + (inLast ? 150 : 0);
  const at = {};
  columns.forEach((c, i) => c.forEach((n, j) => {
    at[n] = {x: left + i * colGap, y: top + 14 + (j + (most - c.length) / 2) * rowGap};
  }));
  let svg = `<svg width="${width}" height="${height}" data-edges="${edges.length}">`;
  jobs.forEach((j, i) => svg += `<text x="${left + i * colGap}" y="14" text-anchor="middle" fill="#777">job ${esc(j)}</text>`);
  for (const e of edges) {
    const p = at[e.a], q = at[e.b];
    if (!p || !q) continue;
    const st = edgeState(e);
    const total = ((e.bytes_per_s_ab ?? 0) + (e.bytes_per_s_ba ?? 0)) / 1e6;
    const w = 1.5 + Math.min(8, Math.log2(1 + total) * 1.2);
    const color = st === "down" ? "#c00" : st === "unknown" ? "#999" : "#4a8bd6";
    const dash = st === "down" ? ' stroke-dasharray="7 4"' : st === "unknown" ? ' stroke-dasharray="2 3"' : "";
    // Tasks of one job: a curve to the right of their column.
    let d, mx, my;
    if (p.x === q.x) {
      const bulge = Math.min(100, 40 + Math.abs(q.y - p.y) * 0.35);
      d = `M${p.x},${p.y} Q${p.x + 2 * bulge},${(p.y + q.y) / 2} ${q.x},${q.y}`;
      mx = p.x + bulge; my = (p.y + q.y) / 2;
    } else {
      d = `M${p.x},${p.y} L${q.x},${q.y}`;
      mx = (p.x + q.x) / 2; my = (p.y + q.y) / 2 - 4;
    }
    const label = (e.bytes_per_s_ab !== null && e.bytes_per_s_ab !== undefined) ||
                  (e.bytes_per_s_ba !== null && e.bytes_per_s_ba !== undefined)
      ? `${mbs(e.bytes_per_s_ab)} ⇄ ${mbs(e.bytes_per_s_ba)} MB/s` : st === "down" ? "down" : "";
    svg += `<g class="edge" data-a="${esc(e.a)}" data-b="${esc(e.b)}" data-state="${st}">` +
      `<title>${esc(e.a)} ⇄ ${esc(e.b)}: CAF ${e.caf_up === null ? "?" : e.caf_up ? "up" : "down"}, ` +
      `channel ${e.channel_up === null ? "?" : e.channel_up ? "up" : "down"}, ` +
      `${esc(short(e.a))}→${esc(short(e.b))} ${mbs(e.bytes_per_s_ab)} MB/s, ` +
      `${esc(short(e.b))}→${esc(short(e.a))} ${mbs(e.bytes_per_s_ba)} MB/s</title>` +
      `<path d="${d}" fill="none" stroke="${color}" stroke-width="${w.toFixed(1)}"${dash} stroke-linecap="round"/>` +
      (label ? `<text x="${mx}" y="${my}" text-anchor="middle">${label}</text>` : "") + "</g>";
  }
  for (const n of names) {
    const {x, y} = at[n], st = state[n] || "unknown";
    const fillc = st === "up" ? "#e3f1e3" : st === "down" ? "#fbd9d9" : "#eee";
    const stroke = st === "up" ? "#2a7d2a" : st === "down" ? "#c00" : "#999";
    svg += `<g class="node" data-task="${esc(n)}" data-state="${esc(st)}"><title>${esc(n)}: ${esc(st)}</title>` +
      `<rect x="${x - 48}" y="${y - 13}" width="96" height="26" rx="13" fill="${fillc}" stroke="${stroke}" stroke-width="1.5"/>` +
      `<text x="${x}" y="${y + 4}" text-anchor="middle">${esc(short(n))}</text></g>`;
  }
  const box = document.getElementById("topology");
  box.innerHTML = svg + "</svg>";
  box.dataset.edges = edges.length;
  const yesno = v => v === null || v === undefined ? "?" : v ? "up" : "<b style='color:#c00'>down</b>";
  fill("topology-table", edges.map(e =>
    `<tr data-a="${esc(e.a)}" data-b="${esc(e.b)}" data-state="${edgeState(e)}">
     <td class="l">${esc(short(e.a))}</td><td class="l">${esc(short(e.b))}</td>
     <td class="l">${yesno(e.caf_up)}</td><td class="l">${yesno(e.channel_up)}</td>
     <td>${mbs(e.bytes_per_s_ab)}</td><td>${mbs(e.bytes_per_s_ba)}</td></tr>`));
}

// -- charts ------------------------------------------------------------------

const cpuLast = {};  // task -> {inc, cpu, at, value}: CPU % from two samples

function cpuPercent(t) {
  const p = t.node.process || {};
  if (p.cpu_percent !== undefined && p.cpu_percent !== null) return p.cpu_percent;
  if (p.cpu_seconds === undefined) return null;
  const at = t.node.now_us, prev = cpuLast[t.task];
  if (prev && prev.inc === t.incarnation && prev.at === at) return prev.value;  // the same sample
  const value = prev && prev.inc === t.incarnation && at > prev.at && p.cpu_seconds >= prev.cpu
    ? (p.cpu_seconds - prev.cpu) / ((at - prev.at) / 1e6) * 100 : null;
  cpuLast[t.task] = {inc: t.incarnation, cpu: p.cpu_seconds, at, value};
  return value;
}

// Each chart's value per series key in this document (null: no value).
function samples(doc) {
  const out = {steps: {}, bytes: {}, mailbox: {}, queues: {}, loss: {}, examples: {}, rss: {}, cpu: {}};
  for (const t of doc.tasks) {
    if (t.state !== "up" || !t.node) continue;
    const n = t.node, name = short(t.task);
    if (n.steps.total > 0) out.steps[name] = n.steps.per_s ?? null;
    for (const l of n.channel)
      if (l.direction === "out") out.bytes[name + " → " + linkName(l)] = l.bytes_per_s === undefined ? null : l.bytes_per_s / 1e6;
    out.mailbox[name] = Math.max(0, ...n.actors.map(a => a.mailbox_max));
    for (const a of n.actors)
      if (a.kind === "queue") out.queues[name + " " + a.name] = a.gauges.size;
    for (const p of n.training) {
      out.loss[short(p.task)] = p.loss;
      out.examples[short(p.task)] = p.examples_per_sec;
    }
    if (n.process && n.process.rss_bytes) out.rss[name] = n.process.rss_bytes / 1e6;
    out.cpu[name] = cpuPercent(t);
  }
  return out;
}

function trim(h, max) {
  const drop = h.t.length - max;
  if (drop <= 0) return;
  h.t.splice(0, drop);
  for (const chart of Object.values(h.series))
    for (const values of Object.values(chart)) values.splice(0, drop);
}

function record(doc) {
  hist.t.push(doc.now_us / 1e6);
  const s = samples(doc);
  for (const chart of Object.keys(s)) {
    const series = hist.series[chart] ??= {};
    for (const key of Object.keys(s[chart]))
      series[key] ??= new Array(hist.t.length - 1).fill(null);
    for (const key of Object.keys(series))
      series[key].push(key in s[chart] ? s[chart][key] : null);
  }
  trim(hist, keep);
  recordActors(doc);
}

// /api/history's series name -> [chart, key, scale] for the task `name`;
// `peers` names the tasks at the other end of its links by address.
function historyKey(series, name, values, peers) {
  if (series === "steps_per_s") return values.some(v => v > 0) ? ["steps", name, 1] : null;
  const plain = {loss: "loss", examples_per_s: "examples", mailbox_max: "mailbox",
                 cpu_percent: "cpu", rss_bytes: "rss"}[series];
  if (plain) return [plain, name, series === "rss_bytes" ? 1e-6 : 1];
  if (series.startsWith("queue:")) return ["queues", name + " " + series.slice(6), 1];
  if (series.startsWith("link_out:")) {
    const peer = series.slice(9);
    return ["bytes", name + " → " + short(peers[peer] ?? peer), 1e-6];
  }
  return null;
}

// The console's history before the page opened, on whole seconds (so that
// the tasks' samples line up), averaged down to seedKeep points, before the
// live samples.
function seed(h, doc) {
  const cells = new Map();  // second -> [chart, key, value][]
  for (const [task, th] of Object.entries(h.tasks || {})) {
    const ts = th.t || [];
    // A link the task could not name yet is named by its address: the
    // document's links say whose it is.
    const peers = {};
    for (const l of doc?.tasks.find(t => t.task === task)?.node?.channel ?? [])
      if (l.peer_task) peers[l.peer] = l.peer_task;
    for (const [series, values] of Object.entries(th.series || {})) {
      if (!Array.isArray(values)) continue;
      const to = historyKey(series, short(task), values, peers);
      if (!to) continue;
      values.forEach((v, i) => {
        if (v === null || v === undefined || !Number.isFinite(v) || ts[i] === undefined) return;
        const sec = Math.round(ts[i]);
        if (!cells.has(sec)) cells.set(sec, []);
        cells.get(sec).push([to[0], to[1], v * to[2]]);
      });
    }
  }
  const first = hist.t.length ? hist.t[0] : Infinity;
  const secs = [...cells.keys()].filter(s => s < first - 0.5).sort((x, y) => x - y);
  if (!secs.length) return 0;
  const stride = Math.ceil(secs.length / seedKeep);
  const t = [], sums = {};  // sums[chart][key][point] = [sum, count]
  for (let i = 0, p = 0; i < secs.length; i += stride, ++p) {
    const group = secs.slice(i, i + stride);
    t.push(group[group.length - 1]);
    for (const s of group)
      for (const [chart, key, v] of cells.get(s)) {
        const values = (sums[chart] ??= {})[key] ??= [];
        const cell = values[p] ??= [0, 0];
        cell[0] += v; cell[1] += 1;
      }
  }
  const live = hist.t.length;
  for (const chart of new Set([...Object.keys(sums), ...Object.keys(hist.series)])) {
    const series = hist.series[chart] ??= {};
    for (const key of new Set([...Object.keys(sums[chart] ?? {}), ...Object.keys(series)])) {
      const cells = sums[chart]?.[key] ?? [];
      const before = t.map((_, p) => cells[p] ? cells[p][0] / cells[p][1] : null);
      series[key] = before.concat(series[key] ?? new Array(live).fill(null));
    }
  }
  hist.t = t.concat(hist.t);
  trim(hist, keep);
  return t.length;
}

const plots = {};
const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

// Draws series {key: values} over t into the element `id`, with one uPlot
// kept per element (made again when the keys change).
function plot(id, t, series, size = {width: 450, height: 190}) {
  const el = document.getElementById(id);
  const keys = Object.keys(series).sort();
  const data = [t.slice(), ...keys.map(k => series[k].slice())];
  el.dataset.points = data.slice(1).reduce((n, v) => n + v.filter(x => x !== null && x !== undefined).length, 0);
  el.dataset.series = keys.length;
  el.dataset.from = t.length ? t[0] : "";  // the oldest and newest points' times (unix s)
  el.dataset.to = t.length ? t[t.length - 1] : "";
  let c = plots[id];
  if (c && c.keys !== keys.join("|")) { c.plot.destroy(); c = plots[id] = null; }
  if (!keys.length) return;
  if (!c) {
    const plot = new uPlot({
      ...size,
      series: [{}, ...keys.map((k, i) => ({label: k, stroke: palette[i % palette.length], width: 1.5, spanGaps: false}))],
      axes: [{}, {size: 60}],
      legend: {show: true},
    }, data, el);
    plots[id] = {plot, keys: keys.join("|")};
  } else {
    c.plot.setData(data);
  }
}

function draw() {
  for (const el of document.querySelectorAll("#charts .chart")) {
    const chart = el.id.slice(6);
    const empty = !Object.keys(hist.series[chart] ?? {}).length;
    const note = el.querySelector(".empty");
    if (empty && !note)
      el.insertAdjacentHTML("beforeend", '<div class="empty">(nothing of this kind in the cluster)</div>');
    else if (!empty && note)
      note.remove();
    plot(el.id, hist.t, hist.series[chart] ?? {});
  }
}

let firstDoc;
const gotDoc = new Promise(done => firstDoc = done);

async function loadHistory() {
  try {
    const r = await historyAsked;
    if (!r || !r.ok) return;
    const h = await r.json();
    // The first document (it comes at once) names the links.
    await Promise.race([gotDoc, new Promise(done => setTimeout(done, 1500))]);
    const n = seed(h, lastDoc);
    document.body.dataset.seeded = n;
    draw();
  } catch (e) {
    console.warn("history:", e);
  }
}

// -- actors ------------------------------------------------------------------

let actorList = [];  // every actor of the up tasks in the last document
const actorsView = {sort: "mailbox", dir: -1, filter: "", page: 0, size: 50, selected: null, last: null};
const actorKey = a => a.host + "|" + a.id;
const num = x => (x === undefined || x === null || Number.isNaN(x)) ? -Infinity : Number(x);
const sorts = {
  task: (x, y) => x.host.localeCompare(y.host, undefined, {numeric: true}),
  kind: (x, y) => String(x.kind).localeCompare(String(y.kind)),
  name: (x, y) => String(x.name).localeCompare(String(y.name), undefined, {numeric: true}),
  mailbox: (x, y) => (num(x.mailbox) - num(y.mailbox)) || (num(x.mailbox_max) - num(y.mailbox_max))
                     || (num(x.messages_per_s) - num(y.messages_per_s)),
  max: (x, y) => num(x.mailbox_max) - num(y.mailbox_max),
  msgs: (x, y) => num(x.messages_per_s) - num(y.messages_per_s),
  busy: (x, y) => num(x.busy_percent) - num(y.busy_percent),
};
const textSorts = new Set(["task", "kind", "name"]);

function actorRows() {
  const q = actorsView.filter.trim().toLowerCase();
  const rows = q ? actorList.filter(a => [a.host, short(a.host), a.task, a.kind, a.name]
    .some(f => String(f ?? "").toLowerCase().includes(q))) : actorList.slice();
  const by = sorts[actorsView.sort], dir = actorsView.dir;
  // Ties in task, then id order: rows do not jump between updates.
  rows.sort((x, y) => (by(x, y) || 0) * dir || sorts.task(x, y) || x.id - y.id);
  return rows;
}

function renderActors() {
  const rows = actorRows(), size = actorsView.size;
  const pages = Math.max(1, Math.ceil(rows.length / size));
  actorsView.page = Math.min(Math.max(0, actorsView.page), pages - 1);
  const from = actorsView.page * size, shown = rows.slice(from, from + size);
  fill("actors", shown.map(a => {
    const full = String(a.name ?? ""), name = full.length > 60 ? full.slice(0, 57) + "…" : full;
    return `<tr data-task="${esc(a.host)}" data-id="${esc(a.id)}"${actorKey(a) === actorsView.selected ? ' class="selected"' : ""}>
     <td class="l">${esc(short(a.host))}</td><td class="l">${esc(a.kind)}</td>
     <td class="l name" title="${esc(full)}">${a.orphaned ? '<span class="orphaned" title="a leftover of a task that is down">orphaned</span> ' : ""}${esc(name)}</td>
     <td>${a.mailbox}</td><td>${a.mailbox_max}</td><td>${fmt(a.messages_per_s, 1)}</td>
     <td>${fmt(a.busy_percent, 1)}</td></tr>`;
  }));
  const table = document.getElementById("actors");
  table.dataset.rows = rows.length;
  table.dataset.total = actorList.length;
  table.dataset.page = actorsView.page;
  table.dataset.pages = pages;
  document.getElementById("actors-range").textContent = rows.length
    ? `rows ${from + 1}–${from + shown.length} of ${rows.length}` +
      (rows.length < actorList.length ? ` (${actorList.length} actors)` : "")
    : actorList.length ? `no actors match (${actorList.length} actors)` : "no actors";
  document.getElementById("actors-prev").disabled = actorsView.page === 0;
  document.getElementById("actors-next").disabled = actorsView.page >= pages - 1;
  for (const th of table.querySelectorAll("th[data-sort]")) {
    const on = th.dataset.sort === actorsView.sort;
    th.classList.toggle("sorted", on);
    th.setAttribute("aria-sort", on ? (actorsView.dir > 0 ? "ascending" : "descending") : "none");
    th.querySelector(".arrow")?.remove();
    if (on) th.insertAdjacentHTML("beforeend", `<span class="arrow">${actorsView.dir > 0 ? "▲" : "▼"}</span>`);
  }
}

// Each actor's messages/s, mailbox and busy % from the live documents: the
// selected actor's charts when the console has no /api/actor_history.
const actorSeries = new Map();  // host|id -> {since, t, messages_per_s, mailbox, busy_percent, seen}

function recordActors(doc) {
  const t = doc.now_us / 1e6;
  for (const a of actorList) {
    const k = actorKey(a);
    let s = actorSeries.get(k);
    if (!s || s.since !== a.since_us)
      actorSeries.set(k, s = {since: a.since_us, t: [], messages_per_s: [], mailbox: [], busy_percent: []});
    s.seen = t;
    s.t.push(t);
    s.messages_per_s.push(a.messages_per_s ?? null);
    s.mailbox.push(a.mailbox ?? null);
    s.busy_percent.push(a.busy_percent ?? null);
    if (s.t.length > actorKeep)
      for (const f of ["t", "messages_per_s", "mailbox", "busy_percent"]) s[f].shift();
  }
  for (const [k, s] of actorSeries)
    if (t - s.seen > 120 && k !== actorsView.selected) actorSeries.delete(k);
}

const actorFetch = {key: null, at: 0, busy: false, data: null};

async function fetchActorHistory(force = false) {
  const a = actorsView.last;
  if (!a || actorFetch.busy) return;
  const key = actorKey(a);
  if (!force && actorFetch.key === key && Date.now() - actorFetch.at < 2000) return;
  actorFetch.busy = true;
  try {
    const r = await fetch(`/api/actor_history?task=${encodeURIComponent(a.host)}&id=${encodeURIComponent(a.id)}`);
    const data = r.status === 200 ? await r.json() : null;
    if (actorsView.selected !== key) return;
    actorFetch.key = key;
    actorFetch.at = Date.now();
    actorFetch.data = data && Array.isArray(data.t) ? data : null;
    actorCharts();
  } catch (e) {
    actorFetch.data = null;
  } finally {
    actorFetch.busy = false;
  }
}

function actorCharts() {
  const a = actorsView.last;
  if (!a || !document.getElementById("chart-actor-msgs")) return;
  const key = actorKey(a), local = actorSeries.get(key);
  const fields = ["messages_per_s", "mailbox", "busy_percent"];
  let s = {t: []};
  for (const f of fields) s[f] = [];
  const served = actorFetch.key === key && actorFetch.data;
  if (served) {
    // The console's history, then the live samples it does not have yet.
    const d = actorFetch.data, end = d.t.length ? d.t[d.t.length - 1] : -Infinity;
    s.t = d.t.slice();
    for (const f of fields) s[f] = (d[f] ?? []).slice(0, s.t.length);
    for (const f of fields) while (s[f].length < s.t.length) s[f].push(null);
    if (local)
      local.t.forEach((t, i) => {
        if (t <= end + 0.5) return;
        s.t.push(t);
        for (const f of fields) s[f].push(local[f][i]);
      });
  } else if (local) {
    s = local;
  }
  document.getElementById("actor-detail").dataset.source = served ? "console" : "page";
  const size = {width: 450, height: 130};
  plot("chart-actor-msgs", s.t, {"messages/s": s.messages_per_s}, size);
  plot("chart-actor-mailbox", s.t, {"mailbox": s.mailbox}, size);
  plot("chart-actor-busy", s.t, {"busy %": s.busy_percent}, size);
}

const actorFields = [
  ["id", a => a.id], ["kind", a => a.kind], ["name", a => a.name],
  ["container", a => a.container || "-"], ["task", a => a.task || "-"],
  ["on", a => a.host],
  ["since", a => a.since_us > 0 ? `${clock(a.since_us)} (${ago(a.since_us)} ago)` : "-"],
  ["messages", a => a.messages], ["messages/s", a => fmt(a.messages_per_s, 1)],
  ["busy_us", a => a.busy_us], ["busy %", a => fmt(a.busy_percent, 1)],
  ["busy_max_us", a => a.busy_max_us], ["mailbox", a => a.mailbox],
  ["mailbox_max", a => a.mailbox_max], ["updates/s", a => fmt(a.updates_per_s, 1)],
];

function renderDetail() {
  const box = document.getElementById("actor-detail");
  if (!actorsView.selected) {
    if (box.dataset.actor) {
      for (const id of ["chart-actor-msgs", "chart-actor-mailbox", "chart-actor-busy"])
        if (plots[id]) { plots[id].plot.destroy(); delete plots[id]; }
      box.innerHTML = '<span class="hint">Click an actor for its detail and charts.</span>';
      delete box.dataset.actor;
    }
    return;
  }
  const now = actorList.find(a => actorKey(a) === actorsView.selected);
  if (now) actorsView.last = now;
  const a = actorsView.last;
  box.classList.toggle("gone", !now);
  if (box.dataset.actor !== actorsView.selected) {
    box.dataset.actor = actorsView.selected;
    for (const id of ["chart-actor-msgs", "chart-actor-mailbox", "chart-actor-busy"])
      if (plots[id]) { plots[id].plot.destroy(); delete plots[id]; }
    box.innerHTML = `<button id="actor-close" style="float:right" title="close">✕</button><h3></h3><dl></dl>
      <div class="chart" id="chart-actor-msgs"><h3>messages/s</h3></div>
      <div class="chart" id="chart-actor-mailbox"><h3>mailbox depth</h3></div>
      <div class="chart" id="chart-actor-busy"><h3>busy %</h3></div>`;
  }
  box.querySelector("h3").textContent = `${a.kind} ${short(a.host)}#${a.id}` + (now ? "" : " (no longer reported)");
  const gauges = Object.entries(a.gauges || {}).map(([k, v]) => ["gauge:" + k, () => typeof v === "object" ? JSON.stringify(v) : v]);
  const rows = [...actorFields, ...gauges, ["detail", x => x.detail || "-"]];
  box.querySelector("dl").innerHTML = rows.map(([k, f]) =>
    `<dt>${esc(k.startsWith("gauge:") ? k.slice(6) : k)}</dt><dd data-field="${esc(k)}">${esc(f(a))}</dd>`).join("");
  actorCharts();
}

document.querySelector("#actors thead").addEventListener("keydown", e => {
  if ((e.key === "Enter" || e.key === " ") && e.target.matches("th[data-sort]")) { e.preventDefault(); e.target.click(); }
});
document.querySelector("#actors thead").addEventListener("click", e => {
  const th = e.target.closest("th[data-sort]");
  if (!th) return;
  const by = th.dataset.sort;
  if (actorsView.sort === by) actorsView.dir = -actorsView.dir;
  else { actorsView.sort = by; actorsView.dir = textSorts.has(by) ? 1 : -1; }
  renderActors();
});
document.querySelector("#actors tbody").addEventListener("click", e => {
  const tr = e.target.closest("tr[data-task]");
  if (!tr) return;
  const key = tr.dataset.task + "|" + tr.dataset.id;
  actorsView.selected = actorsView.selected === key ? null : key;
  actorsView.last = actorList.find(a => actorKey(a) === key) || null;
  renderActors();
  renderDetail();
  fetchActorHistory(true);
});
document.getElementById("actor-detail").addEventListener("click", e => {
  if (e.target.id !== "actor-close") return;
  actorsView.selected = actorsView.last = null;
  renderActors();
  renderDetail();
});
document.getElementById("actors-filter").addEventListener("input", e => {
  actorsView.filter = e.target.value;
  actorsView.page = 0;
  renderActors();
});
document.getElementById("actors-prev").addEventListener("click", () => { --actorsView.page; renderActors(); });
document.getElementById("actors-next").addEventListener("click", () => { ++actorsView.page; renderActors(); });
document.getElementById("actors-page-size").addEventListener("change", e => {
  actorsView.size = Number(e.target.value);
  actorsView.page = 0;
  renderActors();
});

// -- logs --------------------------------------------------------------------

const logMax = 2000;
const levels = {trace: 0, debug: 0, info: 1, warning: 2, error: 3};
const logs = {task: "", after: 0, lines: [], busy: false, incarnation: null, failed: 0};

function logFilter() {
  const min = {all: 0, warning: 2, error: 3}[document.getElementById("logs-level").value];
  const q = document.getElementById("logs-search").value;
  const source = q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const test = q ? new RegExp(source, "i") : null;
  return {keep: l => (levels[l.level] ?? 1) >= min && (!test || test.test(l.text)),
          re: q ? new RegExp(source, "gi") : null};
}

function logHtml(l, re) {
  const d = new Date(l.at_us / 1000);
  const at = l.at_us > 0 ? `${clock(l.at_us)}.${String(d.getMilliseconds()).padStart(3, "0")}` : "--:--:--.---";
  let text = "", i = 0;
  if (re)
    for (const m of String(l.text ?? "").matchAll(re)) {
      text += esc(String(l.text).slice(i, m.index)) + "<mark>" + esc(m[0]) + "</mark>";
      i = m.index + m[0].length;
    }
  text += esc(String(l.text ?? "").slice(i));
  const level = levels[l.level] !== undefined ? l.level : "info";
  return `<div class="log ${level}" data-seq="${esc(l.seq)}" data-level="${esc(l.level)}">` +
    `<span class="at">${at}</span> <span class="lvl">${esc(l.level)}</span> <span class="text">${text}</span></div>`;
}

function logCounts(box) {
  const shown = box.querySelectorAll(".log:not(.mark)").length;
  const total = logs.lines.filter(l => !l.mark).length;
  box.dataset.shown = shown;
  box.dataset.total = total;
  box.dataset.task = logs.task;
  document.getElementById("logs-count").textContent = total
    ? `${shown === total ? "all" : shown} of ${total} lines` + (total >= logMax ? ` (the last ${logMax})` : "") : "";
}

// All kept lines again (a new task, level or search).
function renderLogs() {
  const box = document.getElementById("logs-lines"), f = logFilter();
  box.innerHTML = logs.lines.filter(l => l.mark || f.keep(l))
    .map(l => l.mark ? `<div class="log mark">${esc(l.text)}</div>` : logHtml(l, f.re)).join("");
  box.scrollTop = box.scrollHeight;
  logCounts(box);
}

function appendLogs(fresh) {
  const box = document.getElementById("logs-lines"), f = logFilter();
  const bottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
  box.insertAdjacentHTML("beforeend", fresh.filter(l => l.mark || f.keep(l))
    .map(l => l.mark ? `<div class="log mark">${esc(l.text)}</div>` : logHtml(l, f.re)).join(""));
  while (box.childElementCount > logMax) box.firstElementChild.remove();
  if (bottom) box.scrollTop = box.scrollHeight;
  logCounts(box);
}

async function pollLogs() {
  if (!logs.task || logs.busy) return;
  // After a failure, ask again only every 10th update.
  if (logs.failed && updates % 10 !== 0) return;
  logs.busy = true;
  const task = logs.task, status = document.getElementById("logs-status");
  try {
    const r = await fetch(`/api/logs?task=${encodeURIComponent(task)}&after=${logs.after}`);
    if (task !== logs.task) return;
    if (!r.ok) {
      logs.failed++;
      let why = `HTTP ${r.status}`;
      try { why = JSON.parse(await r.text()).error || why; } catch {}
      status.textContent = `no logs of ${short(task)}: ${why}`;
      return;
    }
    logs.failed = 0;
    const d = await r.json();
    const fresh = (d.lines || []).filter(l => l.seq > logs.after);
    if (fresh.length) {
      logs.after = fresh[fresh.length - 1].seq;
      logs.lines.push(...fresh);
      if (logs.lines.length > logMax) logs.lines.splice(0, logs.lines.length - logMax);
      appendLogs(fresh);
    }
    status.textContent = "live";
  } catch (e) {
    status.textContent = "logs: " + e;
  } finally {
    logs.busy = false;
  }
}

function chooseLogTask(task) {
  logs.task = task;
  logs.after = 0;
  logs.lines = [];
  logs.failed = 0;
  logs.incarnation = null;
  renderLogs();
  pollLogs();
}

function logTasks(doc) {
  const select = document.getElementById("logs-task");
  const names = doc.tasks.map(t => t.task);
  if (select.dataset.names !== names.join()) {
    const chosen = select.value || logs.task;
    select.innerHTML = names.map(n => `<option value="${esc(n)}"${n === chosen ? " selected" : ""}>${esc(n)}</option>`).join("");
    select.dataset.names = names.join();
  }
  if (!logs.task && names.length) chooseLogTask(select.value || names[0]);
  // A restarted task numbers its lines from the start again.
  const t = doc.tasks.find(x => x.task === logs.task);
  if (t && t.incarnation) {
    if (logs.incarnation && logs.incarnation !== t.incarnation) {
      logs.after = 0;
      const mark = {mark: true, text: `— ${short(t.task)} restarted —`};
      logs.lines.push(mark);
      appendLogs([mark]);
    }
    logs.incarnation = t.incarnation;
  }
}

document.getElementById("logs-task").addEventListener("change", e => chooseLogTask(e.target.value));
document.getElementById("logs-level").addEventListener("change", renderLogs);
document.getElementById("logs-search").addEventListener("input", renderLogs);

// -- the step timeline -----------------------------------------------------

function timeline(trace) {
  const events = trace.traceEvents || [];
  const lanes = {};
  for (const e of events)
    if (e.ph === "M" && e.name === "process_name") lanes[e.pid] = e.args.name;
  const spans = events.filter(e => e.ph === "X");
  const end = Math.max(1, ...spans.map(e => e.ts + e.dur));
  const pids = Object.keys(lanes).map(Number).sort((a, b) => a - b);
  const laneH = 22, left = 330, width = 900;
  let svg = `<svg width="${left + width + 20}" height="${pids.length * laneH + 30}">`;
  pids.forEach((pid, row) => {
    const y = row * laneH + 4;
    svg += `<text x="0" y="${y + 14}">${esc(lanes[pid])}</text>`;
    for (const e of spans.filter(s => s.pid === pid)) {
      const x = left + e.ts / end * width, w = Math.max(1, e.dur / end * width);
      svg += `<rect class="span" x="${x}" y="${y}" width="${w}" height="${laneH - 6}" fill="#4a8bd6">` +
             `<title>${esc(e.name)}: ${e.dur} µs at ${e.ts} µs</title></rect>`;
    }
  });
  svg += `<text x="${left}" y="${pids.length * laneH + 22}">0</text>` +
         `<text x="${left + width - 40}" y="${pids.length * laneH + 22}">${end} µs</text></svg>`;
  const t = document.getElementById("timeline");
  t.innerHTML = svg;
  t.dataset.spans = spans.length;
}

async function traceNext() {
  const task = document.getElementById("trace-task").value;
  const status = document.getElementById("trace-status");
  if (!task) { status.textContent = "no master has run a step yet"; return; }
  const asked = Date.now() * 1000;
  const r = await fetch("/api/trace?task=" + encodeURIComponent(task), {method: "POST"});
  if (!r.ok) {
    // The console's errors are JSON; its refusals (401, 403) plain text.
    const text = await r.text();
    try { status.textContent = JSON.parse(text).error; } catch { status.textContent = text; }
    return;
  }
  status.textContent = "waiting for the next step of " + task + "…";
  for (let i = 0; i < 100; ++i) {
    await new Promise(done => setTimeout(done, 300));
    const t = await fetch("/api/trace?task=" + encodeURIComponent(task));
    if (!t.ok) continue;
    const at = Number(t.headers.get("X-Traced-At-Us"));
    if (at < asked) continue;
    const trace = await t.json();
    timeline(trace);
    status.textContent = `step of ${task} traced ${new Date(at / 1000).toLocaleTimeString()}`;
    const link = document.getElementById("trace-download");
    link.href = "/api/trace?download=1&task=" + encodeURIComponent(task);
    link.style.display = "";
    return;
  }
  status.textContent = "no step of " + task + " ran within 30 s";
}
document.getElementById("trace-button").addEventListener("click", traceNext);

// -- live updates --------------------------------------------------------------

// Each part on its own: one that throws does not stop the others (the
// error still reaches the console, and the browser tests, afterwards).
function update(doc) {
  const failed = [];
  for (const part of [tables, alerts, topology, record, draw, renderActors, renderDetail, logTasks]) {
    try { part(doc); } catch (e) { failed.push(e); }
  }
  fetchActorHistory();
  pollLogs();
  if (failed.length) setTimeout(() => { throw failed[0]; });
}

const events = new EventSource("/events");
events.onmessage = m => {
  const doc = JSON.parse(m.data);
  ++updates;
  nowUs = doc.now_us || Date.now() * 1000;
  lastDoc = doc;
  update(doc);
  firstDoc();
  document.body.dataset.updates = updates;
};
events.onerror = async () => {
  const status = document.getElementById("status");
  status.textContent = "console unreachable; retrying…";
  // A console restarted with a new token no longer takes our cookie.
  try {
    const r = await fetch("/api/cluster");
    if (r.status === 401)
      status.textContent = "this console needs its token: open the URL it printed (…/?token=…)";
  } catch {}
};
loadHistory();

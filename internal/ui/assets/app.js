// narwhal dashboard: renders the View documents of /narwhal/ui/feed.
// Plain DOM, no dependencies; every value goes in through textContent.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function ms(v) {
  if (v === null || v === undefined) return "–";
  return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 1 : 0) + " ms" : v.toFixed(2) + " s";
}

function pct(v) { return v === null || v === undefined ? "–" : (v * 100).toFixed(1) + " %"; }

function rps(v) { return v.toFixed(2) + "/s"; }

// quantile cells are coloured against the SLO: ≥ 100 % over, ≥ 80 % near.
function setQ(id, v, slo) {
  const c = $(id);
  c.textContent = ms(v);
  c.className = v === null || v === undefined ? "" : v >= slo ? "over" : v >= 0.8 * slo ? "near" : "ok";
}

function renderPools(v) {
  const p = v.pools;
  for (const [role, n, load] of [["prefill", p.prefill, p.prefill_load], ["decode", p.decode, p.decode_load]]) {
    $("pool-" + role).textContent = String(n);
    $("load-" + role).textContent = load.toFixed(2);
    $("bar-" + role).style.width = Math.min(100, load * 50) + "%"; // 1.0 sits at the dashed mark
  }
  $("queue-depth").textContent = String(p.queued);
  $("queue-limit").textContent = p.queue_limit > 0 ? String(p.queue_limit) : "off";
  $("queue-drain").textContent = p.queued > 0 ? p.queue_drain_s.toFixed(1) + " s" : "–";
}

function renderLatency(v) {
  $("slo-ttft").textContent = ms(v.slo.ttft_s);
  $("slo-tpot").textContent = ms(v.slo.tpot_s);
  for (const q of ["p50", "p95", "p99"]) {
    setQ("ttft-" + q, v.last_1m.ttft_s[q], v.slo.ttft_s);
    setQ("tpot-" + q, v.last_1m.tpot_s[q], v.slo.tpot_s);
  }
  for (const [w, key] of [["1m", "last_1m"], ["5m", "last_5m"]]) {
    $("att-" + w).textContent = pct(v[key].attainment);
    $("good-" + w).textContent = rps(v[key].goodput_rps);
    $("thr-" + w).textContent = rps(v[key].served_rps);
  }
  chart($("chart-ttft"), v.series.map((p) => p.ttft_p95_s), v.slo.ttft_s, "line");
  chart($("chart-tpot"), v.series.map((p) => p.tpot_p95_s), v.slo.tpot_s, "line");
  chart($("chart-att"), v.series.map((p) => p.attainment), 1, "line2");
  $("offered").textContent = String(v.totals.offered);
  $("served").textContent = String(v.totals.served);
  $("inflight").textContent = v.totals.inflight + " / " + v.totals.limit;
}

const SVG = "http://www.w3.org/2000/svg";

// chart draws a p95 (or attainment) series with its target dashed.
function chart(svg, values, target, cls) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const top = Math.max(target * 1.5, ...values.filter((x) => x !== null));
  const y = (x) => 68 - (x / top) * 64;
  const slo = document.createElementNS(SVG, "line");
  slo.setAttribute("class", "slo");
  slo.setAttribute("x1", "0"); slo.setAttribute("x2", "300");
  slo.setAttribute("y1", String(y(target))); slo.setAttribute("y2", String(y(target)));
  svg.appendChild(slo);
  const pts = [];
  values.forEach((x, i) => { if (x !== null) pts.push((values.length < 2 ? 300 : (i / (values.length - 1)) * 300).toFixed(1) + "," + y(x).toFixed(1)); });
  if (pts.length === 0) return;
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("class", cls);
  line.setAttribute("points", pts.join(" "));
  svg.appendChild(line);
}

// renderEngines keeps one tile per engine, updated in place.
function renderEngines(v) {
  const box = $("engines");
  const tiles = new Map([...box.children].map((t) => [t.dataset.iid, t]));
  const counts = {};
  for (const e of v.engines) {
    let t = tiles.get(e.iid);
    if (!t) {
      t = el("div", "engine");
      t.dataset.iid = e.iid;
      for (const c of ["role", "iid", "st", "res", "meta"]) t.appendChild(el("div", c));
      box.appendChild(t);
    }
    tiles.delete(e.iid);
    t.dataset.role = e.role;
    t.dataset.status = e.status;
    t.dataset.live = String(e.live);
    t.querySelector(".role").textContent = e.role + (e.pin ? " 📌" : "");
    t.querySelector(".iid").textContent = e.iid;
    t.querySelector(".st").textContent = e.status + (e.lifecycle && e.lifecycle !== "active" ? " · " + e.lifecycle : "");
    t.querySelector(".res").textContent = "resident P " + e.resident_prefill + " · D " + e.resident_decode;
    const gen = e.generation ? "gen " + new Date(e.generation * 1000).toISOString().slice(11, 19) : "gen –";
    t.querySelector(".meta").textContent = (e.tier ? "tier " + e.tier + " · " : "") + gen;
    counts[e.role] = (counts[e.role] || 0) + 1;
  }
  for (const t of tiles.values()) t.remove();
  $("engine-summary").textContent = v.engines.length + " engines · " +
    Object.entries(counts).map(([r, n]) => n + " " + r).join(" · ");
}

function renderFlips(v) {
  const ol = $("flips");
  ol.replaceChildren();
  if (v.flips.length === 0) ol.appendChild(el("li", "empty", "no role changes yet"));
  for (const f of v.flips.slice(0, 50)) {
    const li = el("li");
    li.dataset.iid = f.iid;
    li.appendChild(el("span", "", "t−" + Math.max(0, v.totals.now - f.at).toFixed(0) + "s " + f.iid + " → "));
    li.appendChild(el("span", "to-" + f.to, f.to));
    li.appendChild(el("span", "", " by " + f.by + (f.reason ? " (" + f.reason + ")" : "")));
    ol.appendChild(li);
  }
}

function rows(table, items, cells, empty) {
  const tb = table.querySelector("tbody");
  tb.replaceChildren();
  if (items.length === 0) {
    const tr = el("tr");
    const td = el("td", "empty", empty);
    td.colSpan = table.querySelectorAll("th").length;
    tr.appendChild(td);
    tb.appendChild(tr);
  }
  for (const it of items) {
    const tr = el("tr");
    for (const [cls, text] of cells(it)) tr.appendChild(el("td", cls, text));
    tb.appendChild(tr);
  }
}

function render(v) {
  renderPools(v);
  renderLatency(v);
  renderEngines(v);
  renderFlips(v);
  rows($("drops"), v.drops, (d) => [["", d.terminal], ["", d.cause], ["", String(d.count)]], "every request served");
  rows($("failures"), v.failures.slice(0, 20), (f) => [["", f.rid], ["", f.terminal], ["", f.reason],
    ["", f.status ? String(f.status) : ""], ["", f.engines], ["", f.trace_id ? f.trace_id.slice(0, 12) + "…" : ""], ["err", f.error]],
    "no failures in the journal");
}

function connect() {
  const conn = $("conn");
  const src = new EventSource("/narwhal/ui/feed");
  src.addEventListener("view", (ev) => {
    render(JSON.parse(ev.data));
    conn.textContent = "live";
    conn.className = "conn up";
  });
  src.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn down"; };
}

connect();

/* bloomqg item explorer. Reads window.BLOOMQG_EXPLORER_DATA (gzip + base64 JSON, written by
 * bloomqg.reporting.explorer.encode), decodes it with DecompressionStream and shows one row per
 * generated question. No network: the page works opened from file://.
 *
 * An imported release's explorer also holds one row per published vote line (column "row"): its
 * Table 4 counts those. The view then always filters "row"; by default to the rows a linked
 * metric counts, else to the questions, so that no view counts a question twice.
 *
 * The view lives in the URL fragment (URLSearchParams): f.<column>=<value> (repeatable),
 * m=<metric> and mv=counted|rest, q=<search>, s=[-]<column>, c=<shown columns>, i=<selected row>.
 */
(function () {
  "use strict";

  const LEVEL_ORDER = ["Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create", "Uncategorized"];
  const TRANSITION_ORDER = ["match", "drift", "regression", "leap", "uncategorized"];
  const NONE = "—";
  // A cell key carries the strategy's name; the strategy column its label (the data's strategy_labels).
  const strategyLabel = (s) => ((S.data && S.data.strategy_labels) || {})[s] || s;
  const QUESTION_ROW = "question", LINE_ROW = "published vote line";  // items.QUESTION_ROW, LINE_ROW
  // Columns whose width is their longest value or header, measured (names never cut: a model, a
  // dataset, a strategy, a level); the rest share what is left with these bounds.
  const WIDTHS = {
    target_units: "minmax(64px, 110px)", judged_units: "minmax(64px, 110px)", identified_units: "minmax(80px, 130px)",
    judge_issues: "minmax(90px, 160px)", judge_abstentions: "minmax(90px, 160px)",
    // the two questions share the room left, side by side (the original is what the generated one is read against)
    // (120 px each at least: the default columns then fit the list at 1280 px, none cut at the right edge;
    // the selected row's detail shows both whole)
    new_question: "minmax(120px, 1fr)", original_question: "minmax(120px, 1fr)", prompt_id: "110px",
  };
  // A measured column is never wider than this (a long "— reason" is cut, with its tooltip).
  const MEASURED_MAX = 180;
  const SHORT = { useful: "Usable", unique: "Unique", readable: "Readable", answerable: "Answerable", strategy: "Strategy",
                  target_level: "Target", judged_level: "Judged", transition: "Shift", target_units: "Target units",
                  judged_units: "Judged units", gate: "Agreement", parse: "Parse", new_question: "New question",
                  original_question: "Original", line: "Line", joined: "Joined", row: "Row",
                  finish_reason: "Stopped", prompt_id: "Question ID" };
  const OPEN_GROUPS = new Set(["Row", "Cell", "Bloom level", "Knowledge units", "Votes", "Diagnostics"]);
  // The table's columns for published vote lines (a release's Table 4 rows).
  const LINE_COLUMNS = ["dataset", "model", "strategy", "line", "joined", "unique", "readable", "answerable",
                        "new_question", "judged_units"];
  const FACET_TOP = 8;

  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const fmt = (x) => x.toLocaleString("en-US");

  const S = {
    data: null, n: 0, cols: [], byKey: {}, facets: [],
    filters: new Map(),           // column key -> Set of values (strings)
    metric: null, mv: "all",      // metric name, which of its rows
    q: "", sort: null,            // {key, desc}
    shown: [], selected: -1,      // selected row id
    visible: new Int32Array(0),   // row ids in view order
    expanded: new Set(),          // facets showing all values
    closedGroups: new Set(), lower: null,
  };

  // ---------------------------------------------------------------- decoding
  function base64Bytes(text) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(text);
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  async function decode(text) {
    const stream = new Blob([base64Bytes(text)]).stream().pipeThrough(new DecompressionStream("gzip"));
    const buffer = await new Response(stream).arrayBuffer();
    const length = new DataView(buffer).getUint32(0, true);
    const doc = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
    const start = Math.ceil((4 + length) / 8) * 8;
    const TYPES = { i8: Int8Array, i16: Int16Array, i32: Int32Array, f64: Float64Array };
    const view = (e) => new TYPES[e.dtype](buffer, start + e.offset, e.length);
    for (const c of doc.columns) {
      if (c.kind === "num") c.values = view(c.values);
      else if (c.kind === "multi") {
        // One array of codes per row, sliced once: a row's list is then read without arithmetic.
        const codes = view(c.codes), offsets = view(c.offsets);
        c.flat = codes; c.offsets = offsets;
      } else c.codes = view(c.codes);
    }
    return doc;
  }

  function prepare(doc) {
    S.data = doc; S.n = doc.n;
    for (const c of doc.columns) { S.byKey[c.key] = c; S.cols.push(c); }
    S.facets = S.cols.filter((c) => (c.kind === "cat" || c.kind === "multi") && c.key !== "item_id");
    for (const c of S.facets) c.rank = rankOf(c);
    for (const c of S.facets) if (!OPEN_GROUPS.has(c.group)) S.closedGroups.add(c.group);
    // Table columns: the generated question and its original early and side by side, so both stay in
    // sight on a laptop screen (1280 px); the levels and votes follow.
    const first = ["dataset", "model", "strategy", "new_question", "original_question", "target_level", "judged_level",
                   "transition", "useful"];
    const rest = S.cols.filter((c) => c.shown && !first.includes(c.key)).map((c) => c.key);
    // A dataset, model or strategy column with one value for every row says nothing a row needs:
    // left out by default (the summary names it), its room goes to the questions.
    const constant = (k) => ["dataset", "model", "strategy"].includes(k) && S.byKey[k].dict.length === 1;
    S.defaultShown = [...first.filter((k) => S.byKey[k]), ...rest].filter((k) => !constant(k));
    S.rowKinds = S.byKey.row ? S.byKey.row.dict.slice() : null;
    if (S.rowKinds) {
      S.rowTotals = new Int32Array(S.rowKinds.length);
      for (const x of S.byKey.row.codes) S.rowTotals[x]++;
    }
  }

  // ---------------------------------------------------------------- row kinds (a release)
  // The kinds of row a metric's denominator holds (a release's Table 4: published vote lines).
  function metricRows(metric) {
    const m = S.byKey["m." + metric].values, codes = S.byKey.row.codes, seen = new Set();
    for (let r = 0; r < S.n; r++) if (m[r] === m[r]) seen.add(S.rowKinds[codes[r]]);
    return [...seen];
  }

  // Without an explicit f.row: the kinds the metric counts, else the questions.
  function defaultRowFilter() {
    if (!S.rowKinds || S.filters.has("row")) return;
    const kinds = S.metric ? metricRows(S.metric) : [];
    S.filters.set("row", new Set(kinds.length ? kinds : [QUESTION_ROW]));
  }

  function onlyLines() {
    const f = S.filters.get("row");
    return !!f && f.size === 1 && f.has(LINE_ROW);
  }

  function defaultColumns() {
    return onlyLines() ? LINE_COLUMNS.filter((k) => S.byKey[k]) : S.defaultShown;
  }

  const COLLATOR = new Intl.Collator("en", { numeric: true });
  function rankOf(c) {
    // Sort rank of each dictionary value: Bloom order for levels, else natural order.
    const order = c.key.endsWith("_level") || c.key.endsWith(".bloom_level") ? LEVEL_ORDER
      : c.key === "transition" ? TRANSITION_ORDER : c.key === "row" ? [QUESTION_ROW, LINE_ROW]
      : c.key === "joined" ? ["joined", "repeated text", "placeholder", "no original"] : null;
    const idx = c.dict.map((v, i) => i);
    idx.sort((a, b) => {
      const va = c.dict[a], vb = c.dict[b];
      const na = va.startsWith(NONE), nb = vb.startsWith(NONE);
      if (na !== nb) return na ? 1 : -1;
      if (order) {
        const ra = order.indexOf(va), rb = order.indexOf(vb);
        if (ra !== rb) return (ra < 0 ? 99 : ra) - (rb < 0 ? 99 : rb);
      }
      return COLLATOR.compare(va, vb);
    });
    const rank = new Int32Array(c.dict.length);
    idx.forEach((code, r) => { rank[code] = r; });
    return rank;
  }

  // ---------------------------------------------------------------- URL state
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    S.filters = new Map();
    for (const [k, v] of p) {
      if (k.startsWith("f.") && S.byKey[k.slice(2)]) {
        if (!S.filters.has(k.slice(2))) S.filters.set(k.slice(2), new Set());
        S.filters.get(k.slice(2)).add(v);
      }
    }
    S.metric = p.get("m") && S.byKey["m." + p.get("m")] ? p.get("m") : null;
    S.mv = ["counted", "rest"].includes(p.get("mv")) ? p.get("mv") : "all";
    S.q = p.get("q") || "";
    const s = p.get("s");
    S.sort = s && S.byKey[s.replace(/^-/, "")] ? { key: s.replace(/^-/, ""), desc: s.startsWith("-") } : null;
    defaultRowFilter();
    S.customColumns = !!p.get("c");
    S.shown = S.customColumns ? p.get("c").split(",").filter((k) => S.byKey[k]) : defaultColumns().slice();
    S.selectedPrompt = p.get("i");
    // the report element that opened the explorer: "← Report" returns to it, not to the page's top
    S.back = /^[A-Za-z0-9_-]{1,200}$/.test(p.get("back") || "") ? p.get("back") : null;
    $("report-link").href = "../report.html" + (S.back ? "#" + S.back : "");
    if (!S.selectedPrompt) S.selected = -1;
    $("search").value = S.q;
  }

  function writeHash() {
    const p = new URLSearchParams();
    for (const [k, vs] of S.filters) for (const v of vs) p.append("f." + k, v);
    // Every kind of row, said: a missing f.row means the default (one kind) on the next opening.
    if (S.rowKinds && !S.filters.has("row")) for (const v of S.rowKinds) p.append("f.row", v);
    if (S.metric) { p.set("m", S.metric); if (S.mv !== "all") p.set("mv", S.mv); }
    if (S.q) p.set("q", S.q);
    if (S.sort) p.set("s", (S.sort.desc ? "-" : "") + S.sort.key);
    if (S.customColumns && S.shown.join(",") !== defaultColumns().join(",")) p.set("c", S.shown.join(","));
    if (S.selected >= 0) p.set("i", rowKey(S.selected));
    if (S.back) p.set("back", S.back);
    const hash = "#" + p.toString();
    if (location.hash !== hash) history.replaceState(null, "", hash === "#" ? location.pathname : hash);
    $("permalink").href = location.href;
  }

  // A question is its prompt; a published vote line (no prompt) its line of the votes file.
  function rowKey(r) {
    const prompt = value("prompt_id", r);
    return value("cell", r) + "/" + (prompt === null ? "line " + value("line", r) : prompt);
  }

  // ---------------------------------------------------------------- values
  function value(key, r) {
    const c = S.byKey[key];
    if (c.kind === "num") return Number.isNaN(c.values[r]) ? null : c.values[r];
    if (c.kind === "multi") return Array.from(c.flat.subarray(c.offsets[r], c.offsets[r + 1]), (x) => c.dict[x]);
    const code = c.codes[r];
    return code < 0 ? null : c.dict[code];
  }

  // ---------------------------------------------------------------- filtering
  // Each active filter marks the rows it rejects; a row is shown when no filter rejects it, and
  // a facet counts the rows that only its own filter rejects as well (so its other values stay
  // choosable). Loops run over typed arrays; search matches each distinct text once.
  function filterMasks() {
    const n = S.n, masks = [];
    for (const [key, values] of S.filters) {
      const c = S.byKey[key];
      if (!values.size) continue;
      const allowed = new Uint8Array(c.dict.length + 1);
      c.dict.forEach((v, i) => { if (values.has(v)) allowed[i] = 1; });
      const pass = new Uint8Array(n);
      if (c.kind === "multi") {
        const flat = c.flat, off = c.offsets;
        for (let r = 0; r < n; r++) { for (let j = off[r]; j < off[r + 1]; j++) if (allowed[flat[j]]) { pass[r] = 1; break; } }
      } else {
        const codes = c.codes, last = c.dict.length;
        for (let r = 0; r < n; r++) { const x = codes[r]; pass[r] = allowed[x < 0 ? last : x]; }
      }
      masks.push({ key, pass });
    }
    if (S.metric) {
      const m = S.byKey["m." + S.metric].values, pass = new Uint8Array(n), mv = S.mv;
      for (let r = 0; r < n; r++) {
        const x = m[r];
        pass[r] = x === x && (mv === "all" || (mv === "counted" ? x > 0 : x === 0)) ? 1 : 0;
      }
      masks.push({ key: "#metric", pass });
    }
    const terms = S.q.toLowerCase().split(/\s+/).filter(Boolean);
    if (terms.length) {
      lowerTexts();
      const pass = new Uint8Array(n).fill(1);
      for (const t of terms) {
        const hit = new Uint8Array(n);
        for (const k of SEARCHED) {
          const dict = S.lower[k], codes = S.byKey[k].codes, match = new Uint8Array(dict.length + 1);
          for (let i = 0; i < dict.length; i++) if (dict[i].includes(t)) match[i] = 1;
          const last = dict.length;
          for (let r = 0; r < n; r++) { const x = codes[r]; if (match[x < 0 ? last : x]) hit[r] = 1; }
        }
        for (let r = 0; r < n; r++) pass[r] &= hit[r];
      }
      masks.push({ key: "#search", pass });
    }
    return masks;
  }
  const SEARCHED = ["original_question", "new_question", "prompt_id"];

  let facetCounts = new Map();
  let sortedAll = null, sortedFor = "";

  function order() {
    const key = S.sort ? (S.sort.desc ? "-" : "") + S.sort.key : "";
    if (sortedAll && sortedFor === key) return sortedAll;
    const ids = new Int32Array(S.n).map((_, i) => i);
    if (S.sort) {
      const c = S.byKey[S.sort.key], sign = S.sort.desc ? -1 : 1;
      const keys = new Float64Array(S.n);
      if (c.kind === "num") for (let r = 0; r < S.n; r++) keys[r] = c.values[r] === c.values[r] ? c.values[r] : Infinity;
      else if (c.kind === "multi") for (let r = 0; r < S.n; r++) keys[r] = c.offsets[r] < c.offsets[r + 1] ? c.rank[c.flat[c.offsets[r]]] : 1e9;
      else {
        const rank = c.rank || (c.rank = rankOf(c));
        for (let r = 0; r < S.n; r++) keys[r] = c.codes[r] < 0 ? 1e9 : rank[c.codes[r]];
      }
      ids.sort((a, b) => (keys[a] - keys[b]) * sign || a - b);
    }
    sortedAll = ids; sortedFor = key;
    return ids;
  }

  function recompute() {
    const t0 = performance.now();
    const masks = filterMasks();
    const n = S.n;
    // passing: rows no filter rejects; only[i]: rows that filter i alone rejects.
    const fails = new Uint8Array(n), which = new Uint8Array(n);
    masks.forEach(({ pass }, i) => { for (let r = 0; r < n; r++) if (!pass[r]) { fails[r]++; which[r] = i; } });
    const passing = [], only = masks.map(() => []);
    for (let r = 0; r < n; r++) { if (fails[r] === 0) passing.push(r); else if (fails[r] === 1) only[which[r]].push(r); }
    const maskIndex = new Map(masks.map((m, i) => [m.key, i]));
    facetCounts = new Map();
    for (const c of S.facets) {
      if (S.closedGroups.has(c.group) && !S.filters.has(c.key)) continue;
      const counts = new Int32Array(c.dict.length + 1);
      const rows = maskIndex.has(c.key) ? [passing, only[maskIndex.get(c.key)]] : [passing];
      for (const list of rows) {
        if (c.kind === "multi") {
          const flat = c.flat, off = c.offsets;
          for (let i = 0; i < list.length; i++) { const r = list[i]; for (let j = off[r]; j < off[r + 1]; j++) counts[flat[j]]++; }
        } else {
          const codes = c.codes, last = c.dict.length;
          for (let i = 0; i < list.length; i++) { const x = codes[list[i]]; counts[x < 0 ? last : x]++; }
        }
      }
      facetCounts.set(c.key, counts);
    }
    // The metric banner: rows every other filter keeps, in the metric's denominator.
    S.metricRows = null;
    if (S.metric) {
      const m = S.byKey["m." + S.metric].values;
      const rows = S.mv === "all" ? passing : passing.concat(only[maskIndex.get("#metric")]);
      S.metricRows = rows.filter((r) => m[r] === m[r]);
    }
    const ids = order();
    const inView = new Uint8Array(n);
    for (let i = 0; i < passing.length; i++) inView[passing[i]] = 1;
    const out = new Int32Array(passing.length);
    let k = 0;
    for (let i = 0; i < n; i++) { const r = ids[i]; if (inView[r]) out[k++] = r; }
    S.visible = out;
    S.lastFilterMs = performance.now() - t0;
  }

  // ---------------------------------------------------------------- rendering
  function render() {
    if (!S.customColumns) S.shown = defaultColumns().slice();
    recompute();
    if (S.selectedPrompt) {
      const found = findRow(S.selectedPrompt);
      S.selectedPrompt = null;
      if (found >= 0) S.selected = found;
    }
    const phases = { filter: S.lastFilterMs };
    const timed = (name, fn) => { const t = performance.now(); fn(); phases[name] = performance.now() - t; };
    timed("count", renderCount); timed("banner", renderBanner); timed("filters", renderFilters); timed("head", renderHead);
    timed("rows", () => renderRows(true)); timed("detail", renderDetail); timed("hash", writeHash);
    window.__explorerPhases = phases;
    document.body.dataset.ready = "1";
    window.__explorerLastRenderMs = S.lastRenderMs = performance.now() - S.renderStart;
  }

  function update() { S.renderStart = performance.now(); render(); }

  // A new order of the same rows: no filter or count changes.
  function resort() {
    const inView = new Uint8Array(S.n);
    for (let i = 0; i < S.visible.length; i++) inView[S.visible[i]] = 1;
    const ids = order(), out = new Int32Array(S.visible.length);
    let k = 0;
    for (let i = 0; i < S.n; i++) if (inView[ids[i]]) out[k++] = ids[i];
    S.visible = out;
    renderHead(); renderRows(true); writeHash();
  }

  function lowerTexts() {
    if (S.lower) return;
    S.lower = {};
    for (const k of SEARCHED) S.lower[k] = S.byKey[k].dict.map((t) => t.toLowerCase());
  }

  function findRow(key) {
    for (let r = 0; r < S.n; r++) if (rowKey(r) === key) return r;
    return -1;
  }

  // What the rows in view are: questions, published vote lines, or both ("rows").
  // A row is a model's reply to one prompt, with or without a question the workflow could read
  // ("— no question"): "replies", as the report's overview counts them, not "questions".
  function rowNoun(n) {
    const one = n === 1;
    if (!S.rowKinds) return one ? "reply" : "replies";
    const f = S.filters.get("row");
    if (!f || f.size !== 1) return one ? "row" : "rows";
    return f.has(LINE_ROW) ? (one ? "published vote line" : "published vote lines") : (one ? "reply" : "replies");
  }

  function renderCount() {
    const el = $("count");
    let total = S.n;
    const f = S.rowKinds && S.filters.get("row");
    if (f) { total = 0; S.rowKinds.forEach((v, i) => { if (f.has(v)) total += S.rowTotals[i]; }); }
    el.dataset.count = S.visible.length;
    el.dataset.total = total;
    el.innerHTML = `<b>${fmt(S.visible.length)}</b> of ${fmt(total)} ${rowNoun()}`;
  }

  function selectedCells() {
    // Cells (dataset/strategy/model) the cell filters let through, for the metric banner.
    const pick = (k) => S.filters.get(k);
    return Object.keys(S.data.metrics).filter((key) => {
      const [d, s, m] = key.split("/");
      const strat = strategyLabel(s);
      return (!pick("dataset") || pick("dataset").has(d)) && (!pick("model") || pick("model").has(m))
        && (!pick("strategy") || pick("strategy").has(strat));
    });
  }

  function renderBanner() {
    const el = $("banner");
    if (!S.metric) { el.hidden = true; el.innerHTML = ""; return; }
    const spec = S.data.metric_specs[S.metric] || { label: S.metric, kind: "percent", scale: 100, decimals: 2 };
    const m = S.byKey["m." + S.metric].values;
    let den = 0, num = 0, counted = 0, whole = !spec.graded;  // a graded metric is summed even where all are 0 or 1
    for (const r of S.metricRows) { den++; num += m[r]; if (m[r] > 0) counted++; if (m[r] !== 0 && m[r] !== 1) whole = false; }
    const cells = selectedCells();
    const narrowed = !!S.q || [...S.filters.keys()].some((k) => !["model", "dataset", "strategy", "row"].includes(k));
    let tableN = 0, tableValue = null, tableGated = false, tableBuilt = false;
    for (const key of cells) {
      const v = (S.data.metrics[key] || {})[S.metric];
      if (v) { tableN += v[1]; if (cells.length === 1) { tableValue = v[0]; tableGated = Boolean(v[4]); tableBuilt = Boolean(v[5]); } }
    }
    // the report's † and ‡ beside the same value: it rests on votes the gate flagged; it is fixed
    // by how the panel is built
    const dagger = (tableGated ? `<span class="dagger" title="on votes the gate flagged: what the judges voted, no evidence about the questions">†</span>` : "") +
      (tableBuilt ? `<span class="dagger" title="fixed by how the panel is built: no question could have changed it">‡</span>` : "");
    const value = spec.kind === "sum" ? num : spec.kind === "count" ? counted : den ? (num / den) * spec.scale : null;
    const shown = (x) => (x === null || x === undefined ? NONE : Number(x).toFixed(spec.decimals));
    const where = cells.length === 1 ? (([d, s, m]) => `${m} · ${d} · ${strategyLabel(s)}`)(cells[0].split("/")) : `${cells.length} cells`;
    el.hidden = false;
    el.innerHTML = `<span class="metric">${esc(spec.label)}</span><span>${esc(where)}</span>` +
      // several cells have no one table value: each has its own, in the tables
      (cells.length === 1
        ? `<span>table: <b>${shown(tableValue)}</b>${dagger} over n = <b id="banner-table-n">${fmt(tableN)}</b></span>`
        : `<span>tables: one value per cell, over n = <b id="banner-table-n">${fmt(tableN)}</b> in all</span>`) +
      // filters past the cell (a figure's band or heat-map cell): the value over a part of the cell
      (narrowed ? `<span>here, a part of ${cells.length === 1 ? "the cell" : "these cells"} (the mark's questions), so not the table's value: `
        : `<span>here: `) +
      `<b id="banner-den">${fmt(den)}</b> ${rowNoun(den)} in the denominator, ` +
      // a graded metric (KnowCov's fractions) sums its values; "counted" would count any above 0
      (whole ? `<b>${fmt(counted)}</b> counted` : `values summing to <b>${Number(num).toFixed(2)}</b>`) +
      ` → <b>${shown(value)}</b></span>` +
      `<span class="seg"><button data-mv="all" class="${S.mv === "all" ? "on" : ""}">all ${fmt(den)}</button>` +
      `<button data-mv="counted" class="${S.mv === "counted" ? "on" : ""}">${whole ? "counted" : "above 0:"} ${fmt(counted)}</button>` +
      `<button data-mv="rest" class="${S.mv === "rest" ? "on" : ""}" title="in the denominator, not in the numerator">${whole ? "not counted" : "0:"} ${fmt(den - counted)}</button></span>` +
      `<button class="close" title="Drop the metric filter">×</button>`;
    el.dataset.den = den; el.dataset.tableN = tableN; el.dataset.value = value === null ? "" : value;
  }

  function renderFilters() {
    const groups = new Map();
    for (const c of S.facets) { if (!groups.has(c.group)) groups.set(c.group, []); groups.get(c.group).push(c); }
    let html = "";
    for (const [group, cols] of groups) {
      const open = !S.closedGroups.has(group);
      html += `<details class="group" data-group="${esc(group)}"${open ? " open" : ""}><summary>${esc(group)}</summary>`;
      if (open || cols.some((c) => S.filters.has(c.key))) for (const c of cols) html += facetHtml(c);
      html += "</details>";
    }
    const el = $("filters"), top = el.scrollTop;
    el.innerHTML = html;
    el.scrollTop = top;
  }

  function facetHtml(c) {
    const counts = facetCounts.get(c.key);
    if (!counts) return "";
    const chosen = S.filters.get(c.key) || new Set();
    let codes = c.dict.map((_, i) => i).filter((i) => counts[i] > 0 || chosen.has(c.dict[i]));
    if (!codes.length) return "";
    codes.sort((a, b) => c.rank[a] - c.rank[b]);
    const many = codes.length > FACET_TOP + 2 && !S.expanded.has(c.key);
    if (many) {
      const top = codes.slice().sort((a, b) => counts[b] - counts[a]).slice(0, FACET_TOP);
      codes = codes.filter((i) => top.includes(i) || chosen.has(c.dict[i]));
    }
    let html = `<div class="facet" data-key="${esc(c.key)}"><div class="facet-title"><span title="${esc(c.help || c.label)}">${esc(c.label)}</span>` +
      (chosen.size ? `<span class="reset" data-reset="${esc(c.key)}">reset</span>` : "") + "</div>";
    if (c.key === "transition") html += `<div class="legend">${shiftPopulation()}</div>`;
    else if (c.help) html += `<div class="legend">${esc(c.help)}</div>`;
    if (S.expanded.has(c.key) && c.dict.length > 20) html += `<input class="facet-find" data-find="${esc(c.key)}" placeholder="find a value">`;
    for (const i of codes) {
      const v = c.dict[i];
      html += `<label class="${counts[i] ? "" : "zero"}"><input type="checkbox" data-key="${esc(c.key)}" data-value="${esc(v)}"${chosen.has(v) ? " checked" : ""}>` +
        // a bare dash says what it stands for: no value (not decided, not asked, no question)
        `<span class="v ${cls(c.key, v)}" title="${esc(v)}">${esc(v === NONE ? NONE + " no value" : v)}</span><span class="n">${fmt(counts[i])}</span></label>`;
    }
    const hidden = c.dict.filter((_, i) => counts[i] > 0).length - codes.length;
    if (many && hidden > 0) html += `<div class="more" data-more="${esc(c.key)}">${hidden} more…</div>`;
    else if (S.expanded.has(c.key)) html += `<div class="more" data-more="${esc(c.key)}">fewer</div>`;
    return html + "</div>";
  }

  // What the level-shift counts are over, and the switch to the report's population (useful
  // questions only): a report link's metric already keeps only the questions its number counts.
  function usefulOnly() {
    const f = S.filters.get("useful");
    return !!f && f.size === 1 && f.has("yes");
  }
  function shiftPopulation() {
    const legend = esc(S.byKey.transition.help.split(". Counts")[0]) + ". ";
    if (S.metric) return legend + "Counted over the questions of the report's number you opened.";
    if (usefulOnly()) return legend + `Counted over <b>useful questions only</b>, as the report's shift figures ` +
      `(Figure 3, Table 6) count them. <a href="#" data-useful-only="off">Count every question</a>`;
    return legend + `Counted over <b>every question with a judged level</b>, useful or not; the report's shift ` +
      `figures (Figure 3, Table 6) count useful ones only. <a href="#" data-useful-only="on">Useful only</a>`;
  }
  function setUsefulOnly(on) {
    if (on) S.filters.set("useful", new Set(["yes"])); else S.filters.delete("useful");
    update();
  }

  // The agreement check of a row: passed, or the criteria the gate flagged (unreliable or not measured).
  const gateText = (gate) => (!gate || gate.includes("passed") ? "passed" : "flagged: " + gate.join("; "));

  function cls(key, v) {
    if (v === null || v === undefined || String(v).startsWith(NONE)) return "none";
    if (v === "yes") return "yes";
    if (v === "no") return "no";
    if (key === "transition") return "t-" + v;
    if (key === "gate" && v !== "passed") return "flag";
    if (key === "parse" && v !== "ok") return "flag";
    if (key === "joined" && v !== "joined") return "flag";
    return "";
  }

  // The width of a column sized by its content: its header or its longest value, as drawn.
  let measure = null;
  function measuredWidth(c) {
    if (c.measured) return c.measured;
    if (!measure) measure = document.createElement("canvas").getContext("2d");
    const font = getComputedStyle(document.body).fontFamily;
    measure.font = `600 12px ${font}`;
    let width = measure.measureText(SHORT[c.key] || c.label).width + 10;  // the sort arrow
    measure.font = `600 12.5px ${font}`;  // bold, as a regression or a leap is drawn
    const values = c.kind === "cat" || c.kind === "multi" ? c.dict : [];
    // a value's name is kept whole; a "— why" beside the names is cut (its tooltip holds it)
    const named = values.filter((v) => !v.startsWith(NONE + " "));
    for (const v of named) width = Math.max(width, Math.min(MEASURED_MAX, measure.measureText(v).width));
    if (c.key === "gate") width = Math.max(width, measure.measureText("failed 5").width);
    c.measured = Math.ceil(width) + 4 + "px";
    return c.measured;
  }

  function renderHead() {
    const cols = S.shown.map((k) => S.byKey[k]);
    document.documentElement.style.setProperty("--cols", cols.map((c) => WIDTHS[c.key] || measuredWidth(c)).join(" "));
    $("thead").innerHTML = cols.map((c) => {
      const sorted = S.sort && S.sort.key === c.key;
      const tip = c.label + (c.help ? ". " + c.help : "") + " (click: sort)";
      return `<div data-sort="${esc(c.key)}" class="${sorted ? "sorted" + (S.sort.desc ? " desc" : "") : ""}" title="${esc(tip)}">${esc(SHORT[c.key] || c.label)}</div>`;
    }).join("");
  }

  const ROW = 24;
  function renderRows(reset) {
    const vp = $("viewport");
    $("spacer").style.height = S.visible.length * ROW + "px";
    if (reset && S.selected >= 0) ensureVisible(false);
    const first = Math.max(0, Math.floor(vp.scrollTop / ROW) - 10);
    const last = Math.min(S.visible.length, Math.ceil((vp.scrollTop + vp.clientHeight) / ROW) + 10);
    const cols = S.shown.map((k) => S.byKey[k]);
    let html = "";
    for (let i = first; i < last; i++) {
      const r = S.visible[i];
      html += `<div class="row${r === S.selected ? " sel" : ""}" data-r="${r}" role="row">`;
      for (const c of cols) {
        let v = value(c.key, r);
        if (c.key === "gate") v = v.includes("passed") ? "passed" : `failed ${v.length}`;
        if (Array.isArray(v)) v = v.join("; ");
        const text = v === null ? NONE : c.kind === "num" ? Number(v).toFixed(2) : v;
        html += `<div class="${cls(c.key, v)}${c.kind === "num" ? " num" : ""}" title="${esc(text)}">${esc(text)}</div>`;
      }
      html += "</div>";
    }
    if (!S.visible.length) html = `<div class="empty">No ${rowNoun() === "replies" ? "reply matches" : "row matches"} these filters.</div>`;
    const rows = $("rows");
    rows.style.top = first * ROW + "px";
    rows.innerHTML = html;
  }

  function ensureVisible(redraw = true) {
    const pos = S.visible.indexOf(S.selected);
    if (pos < 0) return;
    const vp = $("viewport"), top = pos * ROW;
    if (top < vp.scrollTop) vp.scrollTop = top;
    else if (top + ROW > vp.scrollTop + vp.clientHeight) vp.scrollTop = top + ROW - vp.clientHeight;
    if (redraw) renderRows(false);
  }

  function kv(obj) {
    return `<dl class="kv">${Object.entries(obj).filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(typeof v === "object" ? JSON.stringify(v) : v)}</dd>`).join("")}</dl>`;
  }

  // Generations: a study's (generate_questions) or an imported release run's provenance keys.
  const GEN_KEYS = ["model_name", "model_id", "generator", "revision", "decoding", "prompt_hashes", "seed",
                    "release", "imported_from", "manifest", "git_commit"];
  const JUDGE_KEYS = ["judge_backend", "judge_prompt_hash", "judge_prompt_sha256", "judge_spec", "text_generator", "git_commit"];
  function pick(obj, keys) { const out = {}; for (const k of keys) if (obj && obj[k] !== undefined) out[k] = obj[k]; return out; }

  // With no question selected: what the rows in view hold, and how to move among them.
  function viewSummary() {
    // Tallies over the rows in view of one kind (null: every row).
    const kindCode = (kind) => (S.rowKinds ? S.rowKinds.indexOf(kind) : -1);
    const rows = (kind) => {
      if (kind === null || !S.rowKinds) return S.visible;
      const codes = S.byKey.row.codes, code = kindCode(kind);
      return S.visible.filter((r) => codes[r] === code);
    };
    const tally = (key, list) => {
      const c = S.byKey[key], counts = new Map();
      for (const r of list) { const v = c.codes[r] < 0 ? NONE : c.dict[c.codes[r]]; counts.set(v, (counts.get(v) || 0) + 1); }
      return [...counts].sort((a, b) => c.rank[c.dict.indexOf(a[0])] - c.rank[c.dict.indexOf(b[0])]);
    };
    const row = (key, label, list) => `<tr><th>${label}</th><td>${tally(key, list).map(([v, n]) =>
      // a name and its count are one atom: "smollm2-135m 9" broke after the hyphen in a narrow pane
      `<span class="atom"><span class="${cls(key, v)}">${esc(v)}</span> ${fmt(n)}</span>`).join(" · ")}</td></tr>`;
    const questions = rows(QUESTION_ROW), lines = S.rowKinds ? rows(LINE_ROW) : [];
    let grid = questions.length && lines.length ? row("row", "Row", S.visible) : "";
    if (questions.length || !lines.length) {
      grid += row("useful", "Usable", questions) + row("transition", "Level shift (useful or not)", questions) +
        row("judged_level", "Judged level (useful or not)", questions);
    }
    if (lines.length) {
      grid += row("joined", "Line joined", lines) + row("unique", "Unique (line)", lines) + row("readable", "Readable (line)", lines) +
        row("answerable", "Answerable (line)", lines);
    }
    const linesNote = S.rowKinds ? `<p class="muted">A release's Table 4 (unique, readable, answerable) counts every line of each run's ` +
      `published votes file, a text judged on several lines on each; the other metrics count the questions, each with the ` +
      `votes of the first line of its text. The <b>Row</b> filter chooses which you see; a table cell sets it for you.</p>` : "";
    return `<h2>${fmt(S.visible.length)} ${rowNoun(S.visible.length)} in view</h2>` +
      `<table class="grid tallies" style="margin-top:8px">${grid}${row("model", "Model", S.visible)}</table>` +
      (questions.length ? `<p class="muted legend-note">${shiftPopulation()}</p>` : "") +
      `<p class="muted" style="margin-top:12px">Select a row: click it, or <kbd>j</kbd> / <kbd>k</kbd>. ` +
      `<kbd>/</kbd> searches, <kbd>Esc</kbd> leaves the search, <kbd>c</kbd> clears the filters, <kbd>?</kbd> lists the keys. ` +
      `A number in the report opens here on the rows behind it.</p>` + linesNote;
  }

  // The judges' verdicts, the majority and the agreement per criterion; and the judges' notes.
  function verdicts(r, criteria) {
    const v = (k) => value(k, r);
    const judges = S.data.judges;
    // One vote per judge, named, as chips that wrap between judges: the table fits the pane at
    // any width, and no judge's name or vote is cut.
    let grid = `<table class="grid verdicts"><tr><th>Criterion</th><th>Votes</th><th>Majority</th>` +
      `<th title="share of the judges' votes that agree with the majority">Agreeing</th></tr>`;
    let notes = "";
    for (const [key, label, majority] of criteria) {
      grid += `<tr><td>${label}</td><td>`;
      for (const j of judges) {
        const x = v(`v.${j}.${key}`);
        grid += `<span class="vote"><span class="who">${esc(j)}</span> <span class="${cls(key, x)}">${esc(x === null ? NONE : x)}</span></span> `;
        const note = S.byKey[`r.${j}.${key}`] ? v(`r.${j}.${key}`) : null;
        if (note) notes += `<div><b>${esc(j)}</b> · ${label}</div><div class="note">${esc(note)}</div>`;
      }
      grid += `</td><td class="${cls(key, majority)}"><b>${esc(majority ?? NONE)}</b></td><td>${esc(v("agree." + key) ?? NONE)}</td></tr>`;
    }
    return { grid: grid + "</table>", notes };
  }

  function countedIn(r) {
    return Object.keys(S.data.metric_specs).filter((name) => S.byKey["m." + name] && !Number.isNaN(S.byKey["m." + name].values[r]))
      .map((name) => { const x = S.byKey["m." + name].values[r]; const spec = S.data.metric_specs[name];
        const shown = spec.kind === "percent" && (x === 0 || x === 1) ? (x ? "✓" : "✗") : Number(x).toFixed(2);
        return `<span class="badge" title="in the denominator of ${esc(spec.label)}; numerator term ${x}">${esc(spec.label)} ${shown}</span>`; }).join(" ");
  }

  function provenance(r) {
    const cell = S.data.cells[value("cell", r)] || {};
    let prov = "";
    if (cell.generations) {
      prov += `<div><b>Generations</b></div>` + kv({ file: cell.generations.file, "this prompt's hash": value("prompt_hash", r),
                                                        ...pick(cell.generations.provenance, GEN_KEYS) });
    }
    if (cell.votes) prov += kv({ votes: cell.votes });
    if (cell.lines) prov += kv({ "published vote lines": cell.lines });
    for (const j of cell.judges || []) {
      prov += `<div style="margin-top:4px"><b>Judge ${esc(j.judge)}</b></div>` + kv({ file: j.file, ...pick(j.provenance, JUDGE_KEYS) });
    }
    if (!prov) prov = `<p class="muted">No provenance was recorded for this cell.</p>`;
    return `<h3>Provenance</h3>${prov}` +
      `<details class="raw"><summary>all recorded provenance</summary><div class="note">${esc(JSON.stringify(cell, null, 1))}</div></details>`;
  }

  // ---------------------------------------------------------------- questions and lines (a release)
  // Rows of r's cell that pass `test`, in row order.
  function inCell(r, test) {
    const cell = S.byKey.cell.codes, c = cell[r], out = [];
    for (let i = 0; i < S.n; i++) if (cell[i] === c && test(i)) out.push(i);
    return out;
  }
  const isLine = (i) => S.byKey.row.codes[i] === S.rowKinds.indexOf(LINE_ROW);
  const sameCode = (key, r) => { const codes = S.byKey[key].codes, x = codes[r]; return (i) => x >= 0 && codes[i] === x; };
  const goto = (i, text) => `<a href="#" data-goto="${i}">${esc(text)}</a>`;
  const lineName = (i) => "line " + value("line", i);
  const itemName = (i) => "item " + value("item_id", i);

  // The published vote lines of a question's text, and the one whose votes the join gave it.
  function questionLines(r) {
    if (!S.rowKinds) return "";
    const taken = value("line", r);
    const lines = inCell(r, (i) => isLine(i) && sameCode("new_question", r)(i));
    if (!lines.length) return `<div class="muted">No published vote line judges this text: no votes.</div>`;
    const own = lines.find((i) => value("line", i) === taken);
    const others = lines.filter((i) => i !== own);
    return `<div>Votes from published ${own === undefined ? NONE : goto(own, lineName(own))} of the votes file` +
      (others.length ? `; the same text is also on ${others.map((i) => goto(i, lineName(i))).join(", ")}, which Table 4 counts as well` : "") +
      `. Table 4 counts the lines, not this question.</div>`;
  }

  function lineDetail(r) {
    const v = (k) => value(k, r);
    const list = (k) => { const x = v(k); return x && x.length ? x.join("; ") : NONE; };
    const line = sameCode("line", r);
    const questions = inCell(r, (i) => !isLine(i) && line(i));
    const sameText = inCell(r, (i) => isLine(i) && i !== r && sameCode("new_question", r)(i));
    let joined;
    if (questions.length) {
      joined = `The join gives this line's votes to ${questions.map((i) => goto(i, itemName(i))).join(", ")}` +
        (sameText.length ? `; the same text is also on ${sameText.map((i) => goto(i, lineName(i))).join(", ")}` : "") + ".";
    } else if (v("joined") === "repeated text") {
      joined = "This text is judged more often than the run's originals wrote it; each of them keeps its own line " +
        `(${sameText.map((i) => goto(i, lineName(i))).join(", ") || NONE}), so no question takes these votes. ` +
        "Table 4 counts this line as well.";
    } else if (v("joined") === "placeholder") {
      joined = "This line judges the template's placeholder, which is no question: the original that wrote it " +
        "failed to parse, and no question takes these votes. Table 4 counts the line.";
    } else {
      joined = "No original of this run produced this text: no question takes these votes. Table 4 counts the line.";
    }
    const { grid } = verdicts(r, [["unique", "Unique", v("unique")], ["readable", "Readable", v("readable")],
      ["answerable", "Answerable", v("answerable")], ["knowledge_units", "Knowledge units", list("judged_units")]]);
    return `<h2>${esc(v("model"))} · ${esc(v("dataset"))} · ${esc(v("strategy"))}</h2>` +
      `<div class="ids">published vote ${esc(lineName(r))} · <span class="${cls("joined", v("joined"))}">${esc(v("joined"))}</span></div>` +
      `<div class="qbox"><div class="label">Judged text</div><div class="q">${esc(v("new_question"))}</div>` +
      `<div class="meta">Units (majority) ${esc(list("judged_units"))}</div></div>` +
      `<h3>Joined to</h3><div>${joined}</div>` +
      `<h3>Verdicts (as published on this line)</h3>${grid}` +
      `<div style="margin-top:5px"><span title="${esc(S.byKey.gate.help)}">judges' agreement check</span> <span class="${cls("gate", list("gate"))}">${esc(gateText(v("gate")))}</span></div>` +
      `<h3>Counted in</h3><div>${countedIn(r) || NONE}</div>` + provenance(r);
  }

  function renderDetail() {
    const el = $("detail");
    const r = S.selected;
    if (r < 0) { el.innerHTML = viewSummary(); return; }
    if (S.rowKinds && isLine(r)) { el.innerHTML = lineDetail(r); return; }
    const v = (k) => value(k, r);
    const list = (k) => { const x = v(k); return x && x.length ? x.join("; ") : NONE; };
    const { grid, notes } = verdicts(r, [["unique", "Unique", v("unique")], ["readable", "Readable", v("readable")],
      ["answerable", "Answerable", v("answerable")], ["bloom_level", "Bloom level", v("judged_level")],
      ["knowledge_units", "Knowledge units", list("judged_units")]]);
    const pe = v("parse_error"), raw = v("generation_raw");
    el.innerHTML =
      `<h2>${esc(v("model"))} · ${esc(v("dataset"))} · ${esc(v("strategy"))}</h2>` +
      `<div class="ids" title="${esc(S.byKey.prompt_id.help)}">dataset item ${esc(v("item_id"))}, asked with ${esc(v("strategy"))} ` +
      `(question ID ${esc(v("prompt_id"))})</div>` +
      `<div class="pair"><div class="qbox"><div class="label">Original</div><div class="q">${esc(v("original_question"))}</div>` +
      `<div class="meta">Level <b>${esc(v("target_level"))}</b><br>Units ${esc(list("target_units"))}` +
      (v("identified_level") !== NONE ? `<br>Model's reading: ${esc(v("identified_level"))} · ${esc(list("identified_units"))}` : "") + `</div></div>` +
      `<div class="qbox"><div class="label">Generated</div><div class="q">${v("new_question") === null ? '<span class="none">no question (parse ' + esc(v("parse")) + ")</span>" : esc(v("new_question"))}</div>` +
      `<div class="meta">Judged <b>${esc(v("judged_level"))}</b> · <span class="${cls("transition", v("transition"))}">${esc(v("transition"))}</span><br>Units ${esc(list("judged_units"))}</div></div></div>` +
      `<h3>Verdicts</h3>${grid}` + (v("new_question") === null ? "" : questionLines(r)) +
      `<div style="margin-top:5px">Usable <b class="${cls("useful", v("useful"))}">${esc(v("useful"))}</b> · ` +
      `<span title="${esc(S.byKey.gate.help)}">judges' agreement check</span> <span class="${cls("gate", list("gate"))}">${esc(gateText(v("gate")))}</span>` +
      ` · parse <span class="${cls("parse", v("parse"))}">${esc(v("parse"))}</span> · ` +
      `<span title="${esc(S.byKey.finish_reason.help)}">the model ${v("finish_reason") === "ran out of tokens" ? "<b>ran out of tokens</b> before finishing" : esc(v("finish_reason") === "finished" ? "finished its answer" : "stopped: " + (v("finish_reason") ?? NONE))}</span>` +
      ` · judge failures ${esc(list("judge_issues"))}` + (S.byKey.judge_abstentions ? ` · not voting ${esc(list("judge_abstentions"))}` : "") + `</div>` +
      (pe ? `<h3>Parse note</h3><div class="note">${esc(pe)}</div>` : "") +
      (raw ? `<h3>Generation (raw answer)</h3><div class="note">${esc(raw)}</div>` : "") +
      (notes ? `<h3>Judges' reasons and answers</h3>${notes}` : "") +
      `<h3>Counted in</h3><div>${countedIn(r) || NONE}</div>` + provenance(r);
  }

  // ---------------------------------------------------------------- actions
  function select(r, scroll = true) {
    S.selected = r;
    if (scroll) ensureVisible(); else renderRows(false);
    renderDetail(); writeHash();
  }

  function move(step) {
    if (!S.visible.length) return;
    let pos = S.visible.indexOf(S.selected);
    pos = pos < 0 ? (step > 0 ? 0 : S.visible.length - 1) : Math.min(S.visible.length - 1, Math.max(0, pos + step));
    select(S.visible[pos]);
  }

  function toggle(key, v, on) {
    if (!S.filters.has(key)) S.filters.set(key, new Set());
    const set = S.filters.get(key);
    if (on) set.add(v); else set.delete(v);
    if (!set.size) S.filters.delete(key);
    update();
  }

  function bind() {
    $("filters").addEventListener("change", (e) => {
      const t = e.target;
      if (t.matches("input[type=checkbox][data-key]")) toggle(t.dataset.key, t.dataset.value, t.checked);
    });
    $("filters").addEventListener("click", (e) => {
      const t = e.target;
      if (t.dataset.usefulOnly) { e.preventDefault(); setUsefulOnly(t.dataset.usefulOnly === "on"); return; }
      if (t.dataset.reset) { S.filters.delete(t.dataset.reset); update(); }
      else if (t.dataset.more) { S.expanded.has(t.dataset.more) ? S.expanded.delete(t.dataset.more) : S.expanded.add(t.dataset.more); renderFilters(); }
    });
    $("filters").addEventListener("toggle", (e) => {
      const g = e.target.dataset && e.target.dataset.group;
      if (!g) return;
      const wasClosed = S.closedGroups.has(g);
      if (e.target.open) S.closedGroups.delete(g); else S.closedGroups.add(g);
      if (wasClosed && e.target.open) update();
    }, true);
    $("filters").addEventListener("input", (e) => {
      const t = e.target;
      if (!t.dataset.find) return;
      const q = t.value.toLowerCase();
      for (const label of t.parentElement.querySelectorAll("label")) label.hidden = !label.textContent.toLowerCase().includes(q);
    });
    $("thead").addEventListener("click", (e) => {
      const key = e.target.dataset.sort;
      if (!key) return;
      if (S.sort && S.sort.key === key) S.sort = S.sort.desc ? null : { key, desc: true };
      else S.sort = { key, desc: false };
      resort();
    });
    $("rows").addEventListener("click", (e) => {
      const row = e.target.closest(".row");
      if (row) { select(Number(row.dataset.r), false); $("viewport").focus({ preventScroll: true }); }
    });
    let pending = 0;
    $("viewport").addEventListener("scroll", () => {
      $("thead").scrollLeft = $("viewport").scrollLeft;  // columns past the list's edge scroll into view with their header
      if (!pending) pending = requestAnimationFrame(() => { pending = 0; renderRows(false); });
    });
    let typing = 0;
    $("search").addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { S.q = $("search").value.trim(); update(); }, 120);
    });
    $("search").addEventListener("keydown", (e) => {
      if (e.key === "Enter") { clearTimeout(typing); S.q = $("search").value.trim(); update(); $("viewport").focus(); if (S.selected < 0) move(1); }
    });
    $("clear").addEventListener("click", clearAll);
    $("permalink").addEventListener("click", (e) => {
      // Copy the view's address when the browser allows it; the link itself is the address too.
      if (!navigator.clipboard) return;
      e.preventDefault();
      navigator.clipboard.writeText(location.href).then(
        () => { $("status").textContent = "Address of this view copied"; setTimeout(() => { $("status").textContent = ""; }, 1500); },
        () => { $("status").textContent = "Copy the address bar to share this view"; setTimeout(() => { $("status").textContent = ""; }, 2500); });
    });
    $("detail").addEventListener("click", (e) => {
      if (e.target.dataset.usefulOnly) { e.preventDefault(); setUsefulOnly(e.target.dataset.usefulOnly === "on"); return; }
      const to = e.target.closest("[data-goto]");
      if (to) { e.preventDefault(); select(Number(to.dataset.goto)); }
    });
    $("banner").addEventListener("click", (e) => {
      if (e.target.dataset.mv) { S.mv = e.target.dataset.mv; update(); }
      else if (e.target.classList.contains("close")) { S.metric = null; S.mv = "all"; update(); }
    });
    $("help-button").addEventListener("click", () => { $("help").hidden = !$("help").hidden; });
    $("columns-button").addEventListener("click", toggleColumnsMenu);
    $("columns-menu").addEventListener("change", (e) => {
      const key = e.target.dataset.col;
      if (!key) return;
      S.customColumns = true;
      if (e.target.checked) S.shown.push(key); else S.shown = S.shown.filter((k) => k !== key);
      renderHead(); renderRows(false); writeHash();
    });
    window.addEventListener("hashchange", () => { readHash(); update(); });
    window.addEventListener("resize", () => renderRows(false));
    document.addEventListener("keydown", onKey);
  }

  function clearAll() { S.filters.clear(); S.metric = null; S.mv = "all"; S.q = ""; $("search").value = ""; defaultRowFilter(); update(); }

  function toggleColumnsMenu() {
    const menu = $("columns-menu");
    if (!menu.hidden) { menu.hidden = true; return; }
    let html = "<h3>Columns</h3>", group = "";
    for (const c of S.cols) {
      if (c.kind === "num" || c.group === "Reasons") continue;
      if (c.group !== group) { group = c.group; html += `<div class="group">${esc(group)}</div>`; }
      html += `<label><input type="checkbox" data-col="${esc(c.key)}"${S.shown.includes(c.key) ? " checked" : ""}> ${esc(c.label)}</label>`;
    }
    menu.innerHTML = html;
    menu.hidden = false;
  }

  function onKey(e) {
    const inField = e.target.matches && e.target.matches("input, textarea");
    if (e.key === "Escape") {
      // Leave the field, keep its text (a search field would clear itself on Esc).
      if (inField) { e.preventDefault(); e.target.blur(); $("viewport").focus(); return; }
      if (!$("help").hidden || !$("columns-menu").hidden) { $("help").hidden = true; $("columns-menu").hidden = true; return; }
      if (S.selected >= 0) { S.selected = -1; renderRows(false); renderDetail(); writeHash(); }
      return;
    }
    if (inField || e.ctrlKey || e.metaKey || e.altKey) return;
    const vpRows = Math.max(1, Math.floor($("viewport").clientHeight / ROW) - 1);
    const actions = {
      j: () => move(1), ArrowDown: () => move(1), k: () => move(-1), ArrowUp: () => move(-1),
      PageDown: () => move(vpRows), PageUp: () => move(-vpRows),
      g: () => S.visible.length && select(S.visible[0]), G: () => S.visible.length && select(S.visible[S.visible.length - 1]),
      "/": () => { $("search").focus(); $("search").select(); }, c: clearAll,
      "?": () => { $("help").hidden = !$("help").hidden; },
    };
    if (actions[e.key]) { e.preventDefault(); actions[e.key](); }
  }

  // ---------------------------------------------------------------- start
  async function start() {
    const t0 = performance.now();
    const status = $("status");
    try {
      const payload = window.BLOOMQG_EXPLORER_DATA;
      if (typeof payload !== "string") throw new Error("data.js is missing or did not load (it must lie beside index.html)");
      if (typeof DecompressionStream === "undefined") throw new Error("this browser lacks DecompressionStream (Chromium 80+, Firefox 113+, Safari 16.4+)");
      const doc = await decode(payload);
      const t1 = performance.now();
      prepare(doc);
      $("title").textContent = doc.title;
      document.title = `${doc.title} · explorer`;
      readHash();
      bind();
      S.renderStart = performance.now();
      render();
      status.textContent = "";
      // The first search would lower-case every distinct text: do it while the reader looks.
      if (window.requestIdleCallback) requestIdleCallback(lowerTexts, { timeout: 3000 }); else setTimeout(lowerTexts, 500);
      window.__explorerTimings = { decodeMs: t1 - t0, totalMs: performance.now() - t0, sinceNavigationMs: performance.now() };
    } catch (error) {
      status.textContent = "Explorer failed to load: " + error.message;
      status.className = "error";
      $("count").textContent = "";
      document.body.dataset.error = error.message;
      throw error;
    }
  }

  // For tests and benchmarks: the state, and the same actions a click performs.
  window.explorer = {
    state: S, update, select, value, rowKey,
    setFilter(key, values) { if (values && values.length) S.filters.set(key, new Set(values)); else S.filters.delete(key); update(); return S.visible.length; },
    sortBy(key, desc = false) { S.sort = key ? { key, desc } : null; resort(); },
    openHash(fragment) { history.replaceState(null, "", "#" + fragment); readHash(); update(); return S.visible.length; },
    setMetric(name, mv = "all") { S.metric = name; S.mv = mv; update(); return S.visible.length; },
  };

  start();
})();

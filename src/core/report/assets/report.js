/* lceval report: sortable tables and the sample browser. Plain DOM, no library, no network.
   Data comes from <script type="application/json" id="lceval-samples">; text is only ever
   set with textContent, so nothing in a sample can become markup. */
(function () {
  "use strict";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  /* -- sortable tables: click a header; numbers sort by data-sort, the rest as text -- */
  function cellKey(row, col) {
    var cell = row.children[col];
    if (!cell) return "";
    var raw = cell.getAttribute("data-sort");
    if (raw !== null) return raw === "" ? null : parseFloat(raw);
    var text = cell.textContent.trim();
    var num = parseFloat(text);
    return text !== "" && !isNaN(num) && /^[-+]?[0-9.]/.test(text) ? num : text.toLowerCase();
  }

  function sortTable(table, col, th) {
    var body = table.tBodies[0];
    var dir = th.getAttribute("aria-sort") === "descending" ? "ascending" : "descending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, col), y = cellKey(b, col);
      if (x === y) return 0;
      if (x === null || x === "–") return 1;
      if (y === null || y === "–") return -1;
      var order = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
      return dir === "ascending" ? order : -order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead) return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () { sortTable(table, col, th); });
    });
  });

  /* -- sample browser -- */
  var holder = document.getElementById("sample-browser");
  var source = document.getElementById("lceval-samples");
  if (!holder || !source) return;
  var data = JSON.parse(source.textContent);
  var samples = data.samples;
  var PAGE = 50;
  var shown = PAGE;
  var open = {};

  function distinct(key) {
    var seen = {};
    samples.forEach(function (s) { seen[s[key]] = true; });
    return Object.keys(seen).sort(function (a, b) { return a.localeCompare(b, undefined, { numeric: true }); });
  }

  function selectFilter(id, label, key) {
    var wrap = el("label", {}, label);
    var sel = el("select", { id: id, "data-key": key });
    sel.appendChild(el("option", { value: "" }, "all"));
    distinct(key).forEach(function (v) { sel.appendChild(el("option", { value: v }, v === "" ? "(none)" : v)); });
    wrap.appendChild(sel);
    return wrap;
  }

  function inputFilter(id, label, type, placeholder) {
    var wrap = el("label", {}, label);
    var input = el("input", { id: id, type: type, placeholder: placeholder || "" });
    if (type === "number") input.setAttribute("step", "any");
    wrap.appendChild(input);
    return wrap;
  }

  var groupLabel = data.group_fields.length ? data.group_fields.join(" / ") : "group";
  var clusterLabel = data.cluster_fields.length ? data.cluster_fields.join(" / ") : "conversation";
  var filters = el("div", { class: "filters" });
  filters.appendChild(selectFilter("f-task", "task", "task"));
  filters.appendChild(selectFilter("f-model", "model", "model"));
  filters.appendChild(selectFilter("f-group", groupLabel, "group"));
  filters.appendChild(selectFilter("f-cluster", clusterLabel, "cluster"));
  filters.appendChild(selectFilter("f-status", "judgment", "status"));
  filters.appendChild(inputFilter("f-min", "score ≥", "number"));
  filters.appendChild(inputFilter("f-max", "score ≤", "number"));
  filters.appendChild(inputFilter("f-text", "text contains", "search", "question, answer, id…"));
  var sortWrap = el("label", {}, "sort");
  var sortSel = el("select", { id: "f-sort" });
  [["", "as run"], ["score-asc", "score ↑"], ["score-desc", "score ↓"], ["item", "item id"]].forEach(function (o) {
    sortSel.appendChild(el("option", { value: o[0] }, o[1]));
  });
  sortWrap.appendChild(sortSel);
  filters.appendChild(sortWrap);
  holder.appendChild(filters);
  var count = el("p", { id: "sample-count" });
  holder.appendChild(count);
  var table = el("table", { id: "sample-table", class: "samples" });
  var head = el("tr");
  ["task", "model", groupLabel, clusterLabel, "item", "seed", "score", "judgment", "context"].forEach(function (h) {
    head.appendChild(el("th", {}, h));
  });
  var thead = el("thead");
  thead.appendChild(head);
  table.appendChild(thead);
  var tbody = el("tbody");
  table.appendChild(tbody);
  holder.appendChild(table);
  var more = el("button", { id: "sample-more", type: "button" }, "show more");
  holder.appendChild(more);

  function value(id) { return document.getElementById(id).value; }

  function matching() {
    var f = { task: value("f-task"), model: value("f-model"), group: value("f-group"),
              cluster: value("f-cluster"), status: value("f-status") };
    var lo = value("f-min"), hi = value("f-max"), text = value("f-text").toLowerCase();
    var loN = lo === "" ? null : parseFloat(lo), hiN = hi === "" ? null : parseFloat(hi);
    var out = [];
    samples.forEach(function (s, i) {
      for (var k in f) { if (f[k] !== "" && String(s[k]) !== f[k]) return; }
      if ((loN !== null || hiN !== null) && (s.score === null || s.score === undefined)) return;
      if (loN !== null && s.score < loN) return;
      if (hiN !== null && s.score > hiN) return;
      if (text) {
        var hay = [s.item, s.question, s.response, s.reference, s.raw].join("\n").toLowerCase();
        if (hay.indexOf(text) < 0) return;
      }
      out.push(i);
    });
    var sort = value("f-sort");
    if (sort === "score-asc" || sort === "score-desc") {
      var sign = sort === "score-asc" ? 1 : -1;
      out.sort(function (a, b) {
        var x = samples[a].score, y = samples[b].score;
        if (x === null) return 1;
        if (y === null) return -1;
        return sign * (x - y) || a - b;
      });
    } else if (sort === "item") {
      out.sort(function (a, b) { return samples[a].item.localeCompare(samples[b].item, undefined, { numeric: true }) || a - b; });
    }
    return out;
  }

  function fmtScore(v) { return v === null || v === undefined ? "–" : (Math.round(v * 1000) / 1000).toString(); }

  function cutText(c) {
    if (c.action === "none") return c.original === null ? "whole context" : "whole context (" + c.original + " tokens)";
    if (c.action === "skipped") return "skipped: did not fit";
    return "cut " + c.policy.replace("truncate-", "") + ": kept " + c.kept + " of " + c.original;
  }

  function block(parent, title, text, pre) {
    parent.appendChild(el("h5", {}, title));
    parent.appendChild(el(pre === false ? "p" : "pre", {}, text === null || text === undefined || text === "" ? "–" : text));
  }

  function detail(s) {
    var td = el("td", { colspan: "9", class: "detail" });
    block(td, "question", s.question);
    block(td, "reference", s.reference);
    block(td, "answer", s.response === null ? "(no answer: " + s.status + ")" : s.response);
    td.appendChild(el("h5", {}, "judgment"));
    var verdict = (s.judge || "no judge") + ": score " + fmtScore(s.score) + ", " + s.status +
      (s.attempts && s.attempts > 1 ? ", " + s.attempts + " attempts" : "");
    td.appendChild(el("p", { class: s.status === "ok" ? "ok" : "warn" }, verdict));
    block(td, "judge's raw output", s.raw);
    if (Object.keys(s.details || {}).length) block(td, "judge details", JSON.stringify(s.details, null, 1));
    td.appendChild(el("h5", {}, "context"));
    var c = s.cut;
    td.appendChild(el("p", {}, cutText(c) + (c.removed ? "; removed tokens " + c.removed[0] + "–" + c.removed[1] : "")));
    if (c.removed && c.original) {
      var bar = el("div", { class: "cutbar", title: "blue: kept, hatched: removed" });
      var parts = [[0, c.removed[0], "kept"], [c.removed[0], c.removed[1], "removed"], [c.removed[1], c.original, "kept"]];
      parts.forEach(function (p) {
        if (p[1] > p[0]) bar.appendChild(el("span", { class: p[2], style: "width:" + (100 * (p[1] - p[0]) / c.original) + "%" }));
      });
      td.appendChild(bar);
    }
    block(td, "metadata and tokens", JSON.stringify({ metadata: s.metadata, tokens: s.tokens, run: s.run, turn: s.turn }, null, 1));
    if (Object.keys(s.extras || {}).length) block(td, "generation extras", JSON.stringify(s.extras, null, 1));
    var tr = el("tr", { class: "sample-detail" });
    tr.appendChild(td);
    return tr;
  }

  function render() {
    var idx = matching();
    count.textContent = idx.length + " of " + samples.length + " samples match" +
      (idx.length > shown ? " (showing " + shown + ")" : "");
    count.setAttribute("data-matching", String(idx.length));
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    idx.slice(0, shown).forEach(function (i) {
      var s = samples[i];
      var tr = el("tr", { class: "sample-row status-" + s.status + (open[i] ? " open" : ""), "data-index": String(i) });
      [s.task, s.model, s.group, s.cluster, s.item, s.seed].forEach(function (v) { tr.appendChild(el("td", {}, v)); });
      tr.appendChild(el("td", { class: "num" }, fmtScore(s.score)));
      tr.appendChild(el("td", { class: "status" }, s.status));
      tr.appendChild(el("td", {}, cutText(s.cut)));
      tr.addEventListener("click", function () { open[i] = !open[i]; render(); });
      tbody.appendChild(tr);
      if (open[i]) tbody.appendChild(detail(s));
    });
    more.style.display = idx.length > shown ? "" : "none";
  }

  /* Re-render only when a filter really changed: a text box also fires "change" when it
     loses focus, which happens on the mousedown of a click on a row; re-rendering then would
     replace the row under the pointer and swallow the click. */
  var lastKey = null;
  function filtersChanged() {
    var key = Array.prototype.map.call(filters.querySelectorAll("select, input"), function (x) { return x.value; }).join("\u0000");
    if (key === lastKey) return;
    lastKey = key;
    shown = PAGE;
    render();
  }
  filters.addEventListener("input", filtersChanged);
  filters.addEventListener("change", filtersChanged);
  more.addEventListener("click", function () { shown += PAGE; render(); });
  filtersChanged();
})();

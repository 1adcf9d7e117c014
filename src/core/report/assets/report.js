/* lceval report: the charts (Vega-Lite specs drawn by vega-embed, inlined before this
   script), sortable tables and the sample browser. No network. Sample text is only ever set
   with textContent, so nothing in a sample can become markup. */
(function () {
  "use strict";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  /* -- charts: one vegaEmbed per placeholder, in page order; each says when it is drawn -- */
  function drawCharts() {
    var source = document.getElementById("lceval-charts");
    if (!source || typeof window.vegaEmbed !== "function") return;
    var specs = JSON.parse(source.textContent);
    var holders = Array.prototype.slice.call(document.querySelectorAll(".chart[data-chart]"));
    var done = 0;
    document.body.setAttribute("data-charts", String(holders.length));
    function finished(holder, ok) {
      holder.setAttribute("data-rendered", ok ? "ok" : "failed");
      done += 1;
      if (done === holders.length) document.body.setAttribute("data-charts-rendered", String(done));
    }
    holders.forEach(function (holder) {
      var spec = specs[+holder.getAttribute("data-chart")];
      var name = (holder.getAttribute("data-title") || "chart").replace(/[^A-Za-z0-9_-]+/g, "_").slice(0, 80);
      window.vegaEmbed(holder, spec, {
        renderer: "svg", downloadFileName: name, scaleFactor: 2,
        actions: { export: true, source: false, compiled: false, editor: false },
        i18n: { SVG_ACTION: "Save as SVG", PNG_ACTION: "Save as PNG" }
      }).then(function () {
        var summary = holder.querySelector("details summary");
        if (summary) summary.setAttribute("aria-label", "Export this chart as SVG or PNG");
        var svg = holder.querySelector("svg");
        if (svg && !svg.getAttribute("aria-label")) svg.setAttribute("aria-label", holder.getAttribute("data-title"));
        finished(holder, true);
      }).catch(function (err) {
        holder.textContent = "This chart could not be drawn: " + err;
        console.error(err);
        finished(holder, false);
      });
    });
  }

  /* -- sortable tables: a button in each header; numbers sort by data-sort, the rest as text -- */
  function cellKey(row, col) {
    var cell = row.children[col];
    if (!cell) return null;
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

  function sortableTables() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      if (!table.tHead) return;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
        var button = el("button", { type: "button", class: "sort" });
        while (th.firstChild) button.appendChild(th.firstChild);
        th.appendChild(button);
        th.addEventListener("click", function () { sortTable(table, col, th); });
      });
    });
  }

  /* -- printing: folded tables print open -- */
  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details"), function (d) { d.open = true; });
  });

  /* -- the sample browser -- */
  function sampleBrowser() {
    var holder = document.getElementById("sample-browser");
    var source = document.getElementById("lceval-samples");
    if (!holder || !source) return;
    var data = JSON.parse(source.textContent);
    var samples = data.samples, items = data.items, models = data.models;
    var PAGE = 50, shown = PAGE, open = {}, compareWith = {};
    var byKey = {};
    samples.forEach(function (s, i) {
      s.modelName = models[s.model];
      s.key = [s.task, s.id, s.seed, s.turn].join("\u0000");
      s.cutKind = s.cut.action === "none" ? "whole" : s.cut.action;
      (byKey[s.key] = byKey[s.key] || []).push(i);
    });
    while (holder.firstChild) holder.removeChild(holder.firstChild);

    function distinct(get) {
      var seen = {};
      samples.forEach(function (s) { seen[get(s)] = true; });
      return Object.keys(seen).sort(function (a, b) { return a.localeCompare(b, undefined, { numeric: true }); });
    }

    function selectFilter(id, label, get, names) {
      var wrap = el("label", { for: id }, label);
      var sel = el("select", { id: id });
      sel.appendChild(el("option", { value: "" }, "all"));
      distinct(get).forEach(function (v) {
        sel.appendChild(el("option", { value: v }, v === "" ? "(none)" : (names && names[v]) || v));
      });
      var box = el("div", { class: "filter" });
      box.appendChild(wrap);
      box.appendChild(sel);
      return { box: box, get: get, id: id };
    }

    function inputFilter(id, label, type, placeholder) {
      var box = el("div", { class: "filter" });
      box.appendChild(el("label", { for: id }, label));
      var input = el("input", { id: id, type: type, placeholder: placeholder || "" });
      if (type === "number") input.setAttribute("step", "any");
      box.appendChild(input);
      return box;
    }

    var groupLabel = data.group_fields.length ? data.group_fields.join(" / ") : "group";
    var clusterLabel = data.cluster_fields.length ? data.cluster_fields.join(" / ") : "conversation";
    var selects = [
      selectFilter("f-task", "task", function (s) { return s.task; }),
      selectFilter("f-model", "model", function (s) { return s.modelName; }),
      selectFilter("f-group", groupLabel, function (s) { return s.group; }),
      selectFilter("f-cluster", clusterLabel, function (s) { return s.cluster; }),
      selectFilter("f-status", "judge parse status", function (s) { return s.status; }),
      selectFilter("f-cut", "context", function (s) { return s.cutKind; },
                   { whole: "whole context", truncated: "truncated", skipped: "skipped", recorded: "recorded" })
    ];
    var filters = el("form", { class: "filters", role: "search", "aria-label": "filter the samples" });
    filters.addEventListener("submit", function (e) { e.preventDefault(); });
    selects.forEach(function (f) { filters.appendChild(f.box); });
    filters.appendChild(inputFilter("f-min", "score ≥", "number"));
    filters.appendChild(inputFilter("f-max", "score ≤", "number"));
    filters.appendChild(inputFilter("f-text", "text contains", "search", "question, answer, id…"));
    var sortBox = el("div", { class: "filter" });
    sortBox.appendChild(el("label", { for: "f-sort" }, "sort"));
    var sortSel = el("select", { id: "f-sort" });
    [["", "as run"], ["score-asc", "score ↑"], ["score-desc", "score ↓"], ["item", "item id"]].forEach(function (o) {
      sortSel.appendChild(el("option", { value: o[0] }, o[1]));
    });
    sortBox.appendChild(sortSel);
    filters.appendChild(sortBox);
    holder.appendChild(filters);
    var count = el("p", { id: "sample-count", role: "status" });
    holder.appendChild(count);
    var wrap = el("div", { class: "scroll" });
    var table = el("table", { id: "sample-table", class: "samples" });
    var head = el("tr");
    ["task", "model", groupLabel, "item", "question", "score", "judgment", "context"].forEach(function (h) {
      head.appendChild(el("th", { scope: "col" }, h));
    });
    var thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    var tbody = el("tbody");
    table.appendChild(tbody);
    wrap.appendChild(table);
    holder.appendChild(wrap);
    var more = el("button", { id: "sample-more", type: "button" }, "show 50 more");
    holder.appendChild(more);

    function value(id) { return document.getElementById(id).value; }

    function matching() {
      var lo = value("f-min"), hi = value("f-max"), text = value("f-text").toLowerCase();
      var loN = lo === "" ? null : parseFloat(lo), hiN = hi === "" ? null : parseFloat(hi);
      var wanted = selects.map(function (f) { return value(f.id); });
      var out = [];
      samples.forEach(function (s, i) {
        for (var k = 0; k < selects.length; k++) {
          if (wanted[k] !== "" && String(selects[k].get(s)) !== wanted[k]) return;
        }
        if ((loN !== null || hiN !== null) && (s.score === null || s.score === undefined)) return;
        if (loN !== null && s.score < loN) return;
        if (hiN !== null && s.score > hiN) return;
        if (text) {
          var it = items[s.item];
          var hay = [s.id, it.question, s.response, it.reference, s.raw, s.reasoning || ""].join("\n").toLowerCase();
          if (hay.indexOf(text) < 0) return;
        }
        out.push(i);
      });
      var sort = value("f-sort");
      if (sort === "score-asc" || sort === "score-desc") {
        var sign = sort === "score-asc" ? 1 : -1;
        out.sort(function (a, b) {
          var x = samples[a].score, y = samples[b].score;
          if (x === null && y === null) return a - b;
          if (x === null) return 1;
          if (y === null) return -1;
          return sign * (x - y) || a - b;
        });
      } else if (sort === "item") {
        out.sort(function (a, b) {
          return String(samples[a].id).localeCompare(String(samples[b].id), undefined, { numeric: true }) || a - b;
        });
      }
      return out;
    }

    function fmtScore(v) { return v === null || v === undefined ? "–" : (Math.round(v * 100) / 100).toFixed(2); }

    function cutText(c) {
      if (c.action === "none") return c.original === null ? "whole context" : "whole context (" + c.original + " tokens)";
      if (c.action === "skipped") return "skipped: did not fit";
      if (c.action === "recorded") return "recorded answer";
      return "cut " + String(c.policy).replace("truncate-", "") + ": kept " + c.kept + " of " + c.original;
    }

    function textBlock(parent, title, text, cls) {
      var box = el("div", { class: "block " + (cls || "") });
      box.appendChild(el("h4", {}, title));
      box.appendChild(el("pre", {}, text === null || text === undefined || text === "" ? "–" : text));
      parent.appendChild(box);
      return box;
    }

    function answerCard(s) {
      var card = el("div", { class: "answer-card" });
      card.appendChild(el("h4", {}, s.modelName + " · score " + fmtScore(s.score)));
      var verdict = (s.judge || "no judge") + ": " + s.status + (s.attempts ? ", " + s.attempts + " attempts" : "");
      card.appendChild(el("p", { class: s.status === "ok" ? "ok" : "warn" }, verdict));
      textBlock(card, "answer", s.response === null ? "(no answer: " + s.status + ")" : s.response);
      if (s.reasoning !== undefined) {
        var fold = el("details", { class: "block reasoning" });
        fold.appendChild(el("summary", {}, "reasoning before the answer" +
          (s.reasoning_tokens ? " (" + s.reasoning_tokens + " tokens)" : "") + ": not scored"));
        fold.appendChild(el("pre", {}, s.reasoning === "" ? "(hidden by the API; only its tokens are known)" : s.reasoning));
        card.appendChild(fold);
      }
      textBlock(card, "judge output (feedback and score)", s.raw);
      if (s.details) textBlock(card, "judge details", JSON.stringify(s.details, null, 1));
      return card;
    }

    function cutBlock(parent, c) {
      var box = el("div", { class: "block" });
      box.appendChild(el("h4", {}, "context cut"));
      box.appendChild(el("p", {}, cutText(c) + (c.removed ? "; removed tokens " + c.removed[0] + "–" + c.removed[1] : "")));
      if (c.removed && c.original) {
        var bar = el("div", { class: "cutbar", role: "img",
          "aria-label": "kept tokens 0–" + c.removed[0] + " and " + c.removed[1] + "–" + c.original + " of " + c.original });
        [[0, c.removed[0], "kept"], [c.removed[0], c.removed[1], "removed"], [c.removed[1], c.original, "kept"]].forEach(function (p) {
          if (p[1] > p[0]) bar.appendChild(el("span", { class: p[2], style: "width:" + (100 * (p[1] - p[0]) / c.original) + "%" }));
        });
        box.appendChild(bar);
        box.appendChild(el("p", { class: "legend" }, "blue: kept · hatched: removed (position in the original context)"));
      }
      parent.appendChild(box);
    }

    function detail(i) {
      var s = samples[i], it = items[s.item];
      var td = el("td", { colspan: "8", class: "detail" });
      var grid = el("div", { class: "detail-grid" });
      textBlock(grid, "question", it.question, "wide");
      textBlock(grid, "reference", it.reference, "wide");
      var answers = el("div", { class: "answers" });
      answers.appendChild(answerCard(s));
      var others = byKey[s.key].filter(function (j) { return j !== i; });
      if (others.length) {
        var pick = compareWith[i] !== undefined ? compareWith[i] : others[0];
        var side = el("div", { class: "compare" });
        var id = "cmp-" + i;
        side.appendChild(el("label", { for: id }, "compare with"));
        var sel = el("select", { id: id, class: "compare-select" });
        others.forEach(function (j) {
          var opt = el("option", { value: String(j) }, samples[j].modelName + " (" + fmtScore(samples[j].score) + ")");
          if (j === pick) opt.selected = true;
          sel.appendChild(opt);
        });
        sel.addEventListener("change", function () { compareWith[i] = +sel.value; render(); });
        side.appendChild(sel);
        side.appendChild(answerCard(samples[pick]));
        answers.appendChild(side);
      }
      grid.appendChild(answers);
      cutBlock(grid, s.cut);
      var t = s.tokens;
      textBlock(grid, "metadata, tokens and run", JSON.stringify({
        metadata: it.metadata, tokens: { prompt: t[0], prefilled: t[1], completion: t[2] }, run: s.run,
        seed: s.seed, turn: s.turn, extras: s.extras }, null, 1));
      td.appendChild(grid);
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
        var s = samples[i], it = items[s.item];
        var tr = el("tr", { class: "sample-row status-" + s.status + (open[i] ? " open" : ""), "data-index": String(i) });
        tr.appendChild(el("td", {}, s.task));
        tr.appendChild(el("td", {}, s.modelName));
        tr.appendChild(el("td", {}, s.group));
        var idCell = el("td");
        var button = el("button", { type: "button", class: "open-sample", "aria-expanded": open[i] ? "true" : "false" }, s.id);
        idCell.appendChild(button);
        tr.appendChild(idCell);
        var q = it.question || "";
        tr.appendChild(el("td", { class: "question" }, q.length > 90 ? q.slice(0, 88) + "…" : q));
        tr.appendChild(el("td", { class: "num" }, fmtScore(s.score)));
        tr.appendChild(el("td", { class: "status" }, s.status));
        tr.appendChild(el("td", {}, cutText(s.cut)));
        tr.addEventListener("click", function (e) {
          if (e.target.closest && e.target.closest("tr.sample-detail")) return;
          open[i] = !open[i];
          render();
        });
        tbody.appendChild(tr);
        if (open[i]) tbody.appendChild(detail(i));
      });
      more.style.display = idx.length > shown ? "" : "none";
    }

    /* Re-render only when a filter really changed: a text box also fires "change" when it
       loses focus, which happens on the mousedown of a click on a row; re-rendering then
       would replace the row under the pointer and swallow the click. */
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
  }

  sortableTables();
  sampleBrowser();
  drawCharts();
})();

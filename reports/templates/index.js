"use strict";
/* The fleet index: pages, sorts and filters every job of the #jobs-data block (layout in
   reports/fleetdata.py). The server renders the first page; rows are rebuilt here from the
   data with createElement/textContent only, so telemetry stays text. Sets body[data-ready]. */
(function () {
  var table = document.getElementById("jobs-table");
  var source = document.getElementById("jobs-data");
  if (!table || !source) { document.body.dataset.ready = "1"; return; }
  var data = JSON.parse(source.textContent);
  var rows = data.rows;
  var strings = data.strings;
  var pageSize = data.page_size;
  var column = {};
  data.columns.forEach(function (name, position) { column[name] = position; });
  var body = table.tBodies[0];
  var filter = document.getElementById("filter");
  var show = document.getElementById("show");
  var shown = document.getElementById("shown");
  var note = document.getElementById("paging-note");
  var pagers = Array.prototype.slice.call(document.querySelectorAll(".pager"));
  var order = rows.map(function (row, index) { return index; });
  var matches = order;
  var page = 0;
  var texts = [];
  var current = { key: null, direction: 1 };

  function text(index, name) {
    var value = rows[index][column[name]];
    return typeof value === "number" ? strings[value] : value;
  }
  function status(index) { return data.statuses[rows[index][column.status]]; }
  function verdict(index) { return data.verdicts[rows[index][column.verdict]]; }
  function worst(index) { return data.severities[rows[index][column.worst]]; }
  function href(index) {
    var value = rows[index][column.href];
    return value === "" ? encodeURIComponent(text(index, "job")) + "/report.html" : value;
  }

  function searchText(index) {
    if (texts[index] === undefined) {
      texts[index] = [text(index, "job"), status(index), verdict(index), worst(index), text(index, "summary"),
        text(index, "cause"), text(index, "detail"), text(index, "severe"), text(index, "error"),
        text(index, "cut")].join(" ").toLowerCase();
    }
    return texts[index];
  }

  function element(tag, className, content) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (content !== undefined) { node.textContent = content; }
    return node;
  }
  function cell(className, children) {
    var td = element("td", className);
    children.forEach(function (child) { td.appendChild(typeof child === "string" ? document.createTextNode(child) : child); });
    return td;
  }
  function badge(prefix, value) { return value === "none" ? "—" : element("span", "badge " + prefix + value, value); }

  function rowElement(index) {
    var tr = element("tr", "job st-" + status(index) + " v-" + verdict(index));
    tr.setAttribute("data-index", String(index));
    var error = text(index, "error");
    var cause = text(index, "cause");
    var causes = [];
    if (error) { causes.push(element("p", "error", error)); }
    if (cause) { causes.push(element("p", "signal", cause), element("p", "detail", text(index, "detail"))); }
    if (text(index, "severe")) { causes.push(element("p", "detail", "most severe: " + text(index, "severe"))); }
    if (!error && !cause) { causes.push(element("p", "detail", text(index, "summary") || "—")); }
    if (text(index, "cut")) {
      var cut = element("p", "cut-mark", "\u2702 ended mid-record: " + text(index, "cut"));
      cut.setAttribute("title", "the writer stopped abruptly");
      causes.push(cut);
    }
    var ranks = [text(index, "ranks")];
    if (text(index, "missing")) {
      ranks.push(element("br"), element("span", "missing-text", "missing " + text(index, "missing")));
    }
    if (text(index, "outliers")) {
      var mark = element("span", "outlier-mark", "\u2691 outliers " + text(index, "outliers"));
      mark.setAttribute("title", "peer outlier ranks");
      ranks.push(element("br"), mark);
    }
    var link = "—";
    if (rows[index][column.href] !== null) {
      link = element("a", "report-link", "report");
      link.setAttribute("href", href(index));
    }
    [cell("job-id", [text(index, "job")]), cell("", [element("span", "badge st-" + status(index), status(index))]),
      cell("", [badge("v-", verdict(index))]), cell("", [badge("sev-", worst(index))]), cell("cause", causes),
      cell("ranks-cell", ranks), cell("", [text(index, "diagnosed")]), cell("", [link])
    ].forEach(function (td) { tr.appendChild(td); });
    return tr;
  }

  function pageCount() { return Math.max(1, Math.ceil(matches.length / pageSize)); }

  function showPager() {
    var pages = pageCount();
    var first = matches.length ? page * pageSize + 1 : 0;
    var last = Math.min(matches.length, (page + 1) * pageSize);
    pagers.forEach(function (pager) {
      pager.hidden = rows.length <= pageSize;
      pager.querySelector(".page-info").textContent = "page " + (page + 1) + " of " + pages + " · jobs " + first +
        "–" + last + " of " + matches.length;
      Array.prototype.forEach.call(pager.querySelectorAll("button"), function (button) {
        var action = button.getAttribute("data-page");
        button.disabled = action === "first" || action === "previous" ? page === 0 : page >= pages - 1;
      });
    });
  }

  function showPage() {
    page = Math.min(Math.max(page, 0), pageCount() - 1);
    var fragment = document.createDocumentFragment();
    matches.slice(page * pageSize, (page + 1) * pageSize).forEach(function (index) {
      fragment.appendChild(rowElement(index));
    });
    body.replaceChildren(fragment);
    showPager();
  }

  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var tag = show.value;
    matches = !words.length && !tag ? order : order.filter(function (index) {
      var tagged = !tag || status(index) === tag || verdict(index) === tag || (tag === "outliers" && !!text(index, "outliers")) ||
        (tag === "cut" && !!text(index, "cut"));
      return tagged && words.every(function (word) {
        return searchText(index).indexOf(word) >= 0;
      });
    });
    shown.textContent = matches.length + " of " + rows.length + " jobs";
    page = 0;
    showPage();
  }

  function sortBy(key) {
    current.direction = current.key === key ? -current.direction : (key === "job" || key === "cause" ? 1 : -1);
    current.key = key;
    var ranks = data.order[key];
    var direction = current.direction;
    order = order.slice().sort(function (left, right) { return (ranks[left] - ranks[right]) * direction || left - right; });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      if (!th.hasAttribute("data-key")) { return; }
      var active = th.getAttribute("data-key") === key;
      th.setAttribute("aria-sort", active ? (direction > 0 ? "ascending" : "descending") : "none");
    });
    applyFilter();
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
    var key = th.getAttribute("data-key");
    var button = th.querySelector("button");
    if (key && button && data.order[key]) { button.addEventListener("click", function () { sortBy(key); }); }
  });
  pagers.forEach(function (pager) {
    pager.addEventListener("click", function (event) {
      var action = event.target.closest("button") && event.target.closest("button").getAttribute("data-page");
      if (!action) { return; }
      page = action === "first" ? 0 : action === "previous" ? page - 1 : action === "next" ? page + 1 : pageCount() - 1;
      showPage();
      if (pager.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_PRECEDING) { table.scrollIntoView(); }
    });
  });
  filter.addEventListener("input", applyFilter);
  show.addEventListener("change", applyFilter);
  if (note) { note.hidden = true; }
  if (filter.value || show.value) { applyFilter(); } else { showPager(); }
  document.body.dataset.ready = "1";
}());

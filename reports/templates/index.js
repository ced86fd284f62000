"use strict";
/* The fleet index: pages, sorts and filters every job of the #jobs-data block (layout in
   reports/fleetdata.py). The server renders the first page, most severe first; rows are rebuilt
   here from the data with createElement/textContent only, so telemetry stays text, and exactly
   as the template draws them (index.html.j2, _attention.html.j2). Sets body[data-ready]. */
(function () {
  var table = document.getElementById("jobs");
  var source = document.getElementById("jobs-data");
  if (!table || !source) { document.body.dataset.ready = "1"; return; }
  var data = JSON.parse(source.textContent);
  var rows = data.rows;
  var strings = data.strings;
  var pageSize = data.page_size;
  var column = {};
  data.columns.forEach(function (name, position) { column[name] = position; });
  var attention = {};
  data.attention.forEach(function (index) { attention[index] = true; });
  var body = table.tBodies[0];
  var filter = document.getElementById("filter");
  var show = document.getElementById("show");
  var shown = document.getElementById("shown");
  var note = document.getElementById("paging-note");
  var pagers = Array.prototype.slice.call(document.querySelectorAll(".pager"));
  var order = rows.map(function (row, index) { return index; });  // the rows come most severe first
  var matches = order;
  var page = 0;
  var texts = [];
  var current = { key: data.default_sort, direction: -1 };
  var LEGACY = "legacy-";
  var SHORT_ID_CHARS = 8;  // reports/formatting.py short_id

  function raw(index, name) { return rows[index][column[name]]; }
  function text(index, name) {
    var value = raw(index, name);
    return typeof value === "number" ? strings[value] : value;
  }
  function status(index) { return data.statuses[raw(index, "status")]; }
  function statusLabel(index) { return data.status_labels[raw(index, "status")]; }
  function verdict(index) { return data.verdicts[raw(index, "verdict")]; }
  function href(index) {
    var value = raw(index, "href");
    return value === "" ? encodeURIComponent(text(index, "job")) + "/report.html" : value;
  }
  function shortId(value) {
    var prefix = value.indexOf(LEGACY) === 0 ? LEGACY : "";
    var rest = value.slice(prefix.length);
    return rest.length <= SHORT_ID_CHARS + 1 ? value : prefix + rest.slice(0, SHORT_ID_CHARS) + "\u2026";
  }
  function signalWords(position) {
    var signal = data.signals[position];
    return signal ? signal[0] + " " + signal[1] : "";
  }

  function searchText(index) {
    if (texts[index] === undefined) {
      var also = raw(index, "also");
      texts[index] = [text(index, "job"), statusLabel(index), verdict(index), text(index, "summary"),
        signalWords(raw(index, "sig")), text(index, "where"), text(index, "detail"),
        also ? also[0] + " " + signalWords(also[1]) + also[2] : "", text(index, "error"), text(index, "cut"),
        raw(index, "session")].join(" ").toLowerCase();
    }
    return texts[index];
  }

  function element(tag, className, content) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (content !== undefined) { node.textContent = content; }
    return node;
  }
  function append(parent, children) {
    children.forEach(function (child) {
      if (child === "") { return; }
      parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return parent;
  }
  function cell(className, children) { return append(element("td", className), children); }
  function badge(prefix, value) { return value === "none" ? "—" : element("span", "badge " + prefix + value, value); }
  function signal(position) {  // _attention.html.j2 signal_span
    var item = data.signals[position];
    var span = element("span", "signal");
    span.setAttribute("title", item[2]);
    return append(span, [item[0] + " ", element("code", "", item[1])]);
  }
  function sessionId(value) {  // _attention.html.j2 session_span
    var span = element("span", "session-id", shortId(value));
    span.setAttribute("title", value);
    return span;
  }

  function causeCell(index) {
    var error = text(index, "error");
    var sig = raw(index, "sig");
    var also = raw(index, "also");
    var session = raw(index, "session");
    var load = raw(index, "loadw");
    var causes = [];
    if (error) { causes.push(element("p", "error", error)); }
    if (sig >= 0) {
      causes.push(append(element("p", "reason"), [signal(sig), text(index, "where")]));
      if (text(index, "detail")) { causes.push(element("p", "detail", text(index, "detail"))); }
    }
    if (also) { causes.push(append(element("p", "detail also"), [also[0] + ": ", signal(also[1]), also[2]])); }
    if (!error && sig < 0) { causes.push(element("p", "detail", text(index, "summary") || "—")); }
    if (session) { causes.push(append(element("p", "detail"), ["session ", sessionId(session)])); }
    if (load) {
      var words = "\u26a0 " + load + " load warning" + (load !== 1 ? "s" : "");
      var mark = element("p", "load-mark");
      if (raw(index, "href") !== null) {
        var link = element("a", "", words);
        link.setAttribute("href", href(index) + "#load-warnings");
        mark.appendChild(link);
      } else { mark.textContent = words; }
      causes.push(mark);
    }
    if (text(index, "cut")) {
      var cut = element("p", "cut-mark", "\u2702 ended mid-record: " + text(index, "cut"));
      cut.setAttribute("title", "the writer stopped abruptly");
      causes.push(cut);
    }
    return cell("cause", causes);
  }

  function rowElement(index) {
    var tr = element("tr", "job st-" + status(index) + " v-" + verdict(index));
    tr.setAttribute("data-index", String(index));
    tr.setAttribute("data-job-id", text(index, "job"));
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
    if (raw(index, "href") !== null) {
      link = element("a", "report-link", "report");
      link.setAttribute("href", href(index));
    }
    var cells = [cell("job-id", [text(index, "job")])];
    if (data.status_column) { cells.push(cell("", [element("span", "badge st-" + status(index), statusLabel(index))])); }
    cells.push(cell("", [badge("v-", verdict(index))]), causeCell(index), cell("ranks-cell", ranks),
      cell("", [text(index, "diagnosed")]), cell("", [link]));
    cells.forEach(function (td) { tr.appendChild(td); });
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

  function tagged(index, tag) {
    if (!tag) { return true; }
    if (tag === "attention") { return attention[index] === true; }
    if (tag === "outliers") { return !!text(index, "outliers"); }
    if (tag === "cut") { return !!text(index, "cut"); }
    if (tag === "load") { return raw(index, "loadw") > 0; }
    return status(index) === tag || verdict(index) === tag;
  }

  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var tag = show.value;
    matches = !words.length && !tag ? order : order.filter(function (index) {
      return tagged(index, tag) && words.every(function (word) {
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
  // "N more need attention" (data-show) and a failed job's line (data-filter): the table, filtered to them
  Array.prototype.forEach.call(document.querySelectorAll("#attention a[data-show], #attention a[data-filter]"),
    function (link) {
      link.addEventListener("click", function () {
        filter.value = link.getAttribute("data-filter") || "";
        show.value = link.getAttribute("data-show") || "";
        applyFilter();
      });
    });
  filter.addEventListener("input", applyFilter);
  show.addEventListener("change", applyFilter);
  if (note) { note.hidden = true; }
  if (filter.value || show.value) { applyFilter(); } else { showPager(); }
  document.body.dataset.ready = "1";
}());

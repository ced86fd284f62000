"use strict";
(function () {
  var table = document.getElementById("jobs-table");
  var source = document.getElementById("jobs-data");
  if (!table || !source) { return; }
  var data = JSON.parse(source.textContent);
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var filter = document.getElementById("filter");
  var show = document.getElementById("show");
  var shown = document.getElementById("shown");
  var current = { key: null, direction: 1 };

  function keyOf(row, key) {
    return data[Number(row.getAttribute("data-index"))][key];
  }

  function compare(a, b) {
    if (Array.isArray(a)) {
      for (var i = 0; i < a.length; i += 1) {
        var c = compare(a[i], b[i]);
        if (c !== 0) { return c; }
      }
      return 0;
    }
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function sortBy(key) {
    current.direction = current.key === key ? -current.direction : (key === "job" || key === "cause" ? 1 : -1);
    current.key = key;
    rows.sort(function (left, right) {
      var c = compare(keyOf(left, key), keyOf(right, key)) * current.direction;
      return c !== 0 ? c : Number(left.getAttribute("data-index")) - Number(right.getAttribute("data-index"));
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      if (!cell.hasAttribute("data-key")) { return; }
      var active = cell.getAttribute("data-key") === key;
      cell.setAttribute("aria-sort", active ? (current.direction > 0 ? "ascending" : "descending") : "none");
    });
  }

  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var tag = show.value;
    var visible = 0;
    rows.forEach(function (row) {
      var item = data[Number(row.getAttribute("data-index"))];
      var match = (!tag || item.tags.indexOf(tag) >= 0) && words.every(function (word) {
        return item.text.indexOf(word) >= 0;
      });
      row.hidden = !match;
      if (match) { visible += 1; }
    });
    shown.textContent = visible + " of " + rows.length + " jobs";
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
    var key = cell.getAttribute("data-key");
    var button = cell.querySelector("button");
    if (key && button) { button.addEventListener("click", function () { sortBy(key); }); }
  });
  filter.addEventListener("input", applyFilter);
  show.addEventListener("change", applyFilter);
}());

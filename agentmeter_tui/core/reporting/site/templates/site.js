// Sorting for tables marked "sortable" and "unfold all" for a transcript: the pages are usable
// without it (every table is plain HTML, every tool call a <details> element).
"use strict";
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var descending = !th.classList.contains("desc");
      table.querySelectorAll("thead th").forEach(function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(descending ? "desc" : "asc");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].getAttribute("data-sort"), y = b.cells[column].getAttribute("data-sort");
        if (x === null) { x = a.cells[column].textContent; }
        if (y === null) { y = b.cells[column].textContent; }
        var nx = parseFloat(x), ny = parseFloat(y);
        var order = (x === "") - (y === "");  // empty values last either way
        if (order !== 0) { return order; }
        order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return descending ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
var unfold = document.getElementById("unfold");
if (unfold) {
  unfold.addEventListener("click", function () {
    document.querySelectorAll("ol.transcript details").forEach(function (d) { d.open = true; });
  });
}

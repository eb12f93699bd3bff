// Sorting for tables marked "sortable", and the trial page's transcript viewer: search, next match,
// jump to the first error, unfold all. The pages are usable without it (every table is plain HTML,
// every tool call a <details> element). Agent text is only ever read as text and split into text
// nodes and <mark> elements: never parsed as markup. The viewer answers URL fragments too
// (#q=WORDS searches, #first-error jumps), so a link can open a trial at a match.
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
(function viewer() {
  var transcript = document.getElementById("transcript");
  var box = document.getElementById("search");
  if (!transcript || !box) { return; }
  var count = document.getElementById("search-count");
  var hits = [], current = -1, searched = null;  // searched: the query the marks are of

  function reveal(node) {  // open the folded tool call around node, scroll to it, mark it current
    for (var p = node; p && p !== transcript; p = p.parentNode) {
      if (p.tagName === "DETAILS") { p.open = true; }
    }
    transcript.querySelectorAll(".current").forEach(function (c) { c.classList.remove("current"); });
    node.classList.add("current");
    node.scrollIntoView({block: "center"});
  }
  function clear() {
    transcript.querySelectorAll("mark").forEach(function (m) {
      var parent = m.parentNode;
      parent.replaceChild(document.createTextNode(m.textContent), m);
      parent.normalize();
    });
    transcript.querySelectorAll("li.hit").forEach(function (li) { li.classList.remove("hit"); });
    hits = []; current = -1;
  }
  function mark(textNode, needle) {
    var text = textNode.nodeValue, lower = text.toLowerCase(), at = lower.indexOf(needle);
    if (at < 0) { return false; }
    var parts = document.createDocumentFragment(), from = 0;
    while (at >= 0) {
      parts.appendChild(document.createTextNode(text.slice(from, at)));
      var m = document.createElement("mark");
      m.textContent = text.slice(at, at + needle.length);
      parts.appendChild(m);
      from = at + needle.length;
      at = lower.indexOf(needle, from);
    }
    parts.appendChild(document.createTextNode(text.slice(from)));
    textNode.parentNode.replaceChild(parts, textNode);
    return true;
  }
  function search(query) {
    clear();
    searched = query;
    var needle = query.trim().toLowerCase();
    if (!needle) { count.textContent = ""; return; }
    var walker = document.createTreeWalker(transcript, NodeFilter.SHOW_TEXT), nodes = [];
    while (walker.nextNode()) {
      var parent = walker.currentNode.parentNode;
      // The events' own text only: a tool call's summary repeats its first line, a meter is ours.
      if (parent.tagName === "PRE") { nodes.push(walker.currentNode); }
    }
    nodes.forEach(function (n) { mark(n, needle); });
    hits = Array.prototype.slice.call(transcript.querySelectorAll("mark"));
    hits.forEach(function (m) { m.closest("li").classList.add("hit"); });
    count.textContent = hits.length ? hits.length + (hits.length === 1 ? " match" : " matches") : "no match";
    if (hits.length) { next(); }
  }
  function next() {
    if (!hits.length) { return; }
    current = (current + 1) % hits.length;
    reveal(hits[current]);
    count.textContent = (current + 1) + " of " + hits.length;
  }
  function firstError() {
    var error = transcript.querySelector("li.error");
    if (error) { reveal(error); } else { count.textContent = "no error event"; }
  }
  var timer = null;
  box.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { search(box.value); }, 150);
  });
  box.addEventListener("keydown", function (e) {
    if (e.key !== "Enter") { return; }
    e.preventDefault();
    clearTimeout(timer);
    if (box.value === searched) { next(); } else { search(box.value); }
  });
  document.getElementById("search-next").addEventListener("click", next);
  document.getElementById("first-error-button").addEventListener("click", firstError);
  function fromFragment() {
    var hash = decodeURIComponent(location.hash.slice(1));
    if (hash.indexOf("q=") === 0) { box.value = hash.slice(2); search(box.value); }
    else if (hash === "first-error") { firstError(); }
  }
  window.addEventListener("hashchange", fromFragment);
  fromFragment();
})();

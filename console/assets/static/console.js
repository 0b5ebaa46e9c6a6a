// AceMQ console: live refresh and small conveniences. No inline script,
// no other origin: the page's Content-Security-Policy allows this file only.
// Every value from the server is set with textContent, never as HTML.
"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";

  function poll(url, every, apply) {
    var busy = false;
    function tick() {
      if (busy) return;
      busy = true;
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (j) { if (j) apply(j); })
        .catch(function () {})
        .then(function () { busy = false; });
    }
    tick();
    return setInterval(tick, every);
  }

  function cell(tr, cls, text) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  // The overview: rebuild the rows from /api/overview every 2 s.
  var overview = document.getElementById("overview");
  if (overview) {
    poll(overview.getAttribute("data-poll"), 2000, function (j) {
      var tbody = overview.tBodies[0];
      var rows = document.createDocumentFragment();
      j.queues.forEach(function (q) {
        var tr = document.createElement("tr");
        tr.setAttribute("data-queue", q.name);
        var td = document.createElement("td");
        var a = document.createElement("a");
        a.href = base + "/q/" + encodeURIComponent(q.name);
        a.textContent = q.name;
        var badge = document.createElement("span");
        badge.className = "badge " + q.kind;
        badge.textContent = q.kind;
        td.appendChild(a);
        td.appendChild(document.createTextNode(" "));
        td.appendChild(badge);
        tr.appendChild(td);
        cell(tr, "", q.source);
        cell(tr, "num depth", String(q.depth));
        cell(tr, "oldest", q.oldest || "");
        cell(tr, "growth", q.error ? q.error : q.growth);
        rows.appendChild(tr);
      });
      if (j.queues.length === 0) {
        var tr = document.createElement("tr");
        tr.className = "empty";
        cell(tr, "", "No .dlq or .parked queues on this broker.").colSpan = 5;
        rows.appendChild(tr);
      }
      tbody.replaceChildren(rows);
      overview.setAttribute("data-refreshed", String(Date.now()));
    });
  }

  // A live depth on the queue and outcome pages.
  var depth = document.getElementById("depth");
  if (depth && depth.getAttribute("data-poll")) {
    var name = depth.getAttribute("data-queue");
    poll(depth.getAttribute("data-poll"), 2000, function (j) {
      j.queues.forEach(function (q) {
        if (q.name === name) depth.textContent = String(q.depth);
      });
    });
  }

  // Purge: the button works only once the queue's name is typed exactly.
  var purgeName = document.getElementById("purge-name");
  var purgeButton = document.getElementById("purge-button");
  if (purgeName && purgeButton) {
    var want = purgeName.getAttribute("data-queue");
    purgeName.addEventListener("input", function () {
      purgeButton.disabled = purgeName.value !== want;
    });
  }

  // Select every row on the page.
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll('#messages input[name="id"]').forEach(function (b) { b.checked = all.checked; });
    });
  }
})();

// AceMQ console: live refresh and small conveniences. No inline script,
// no other origin: the page's Content-Security-Policy allows this file only.
// Every value from the server is set with textContent, never as HTML.
"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";

  // poll fetches url every so often and hands the JSON to apply; a failure
  // (no answer, an error status, an answer that is not JSON) goes to fail
  // with a sentence, so a page never mistakes "unknown" for "nothing".
  function poll(url, every, apply, fail) {
    var busy = false;
    function tick() {
      if (busy) return;
      busy = true;
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.status === 401) throw new Error("signed out (the session expired or was ended): reload the page to sign in again");
          if (!r.ok) throw new Error("the console answered " + r.status);
          return r.json();
        })
        .then(function (j) { apply(j); })
        .catch(function (e) {
          var msg = e && e.message ? e.message : String(e);
          if (e instanceof TypeError) msg = "the console did not answer (" + msg + "); is it still running?";
          if (fail) fail(msg);
        })
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

  function clock() { return new Date().toLocaleTimeString(); }

  // shown fills el with a value as the server split it (nameParts): text
  // as it is, each escaped character marked, so an escape never reads like
  // the same letters typed into a name.
  function shown(el, parts, fallback) {
    if (!parts) { el.textContent = fallback || ""; return el; }
    parts.forEach(function (p) {
      if (p.e) {
        var s = document.createElement("span");
        s.className = "esc";
        s.title = "an escaped character: the name holds this character, not these letters";
        s.textContent = p.t;
        el.appendChild(s);
      } else {
        el.appendChild(document.createTextNode(p.t));
      }
    });
    return el;
  }

  // The overview: rebuild the rows from /api/overview every 2 s. When the
  // queues cannot be listed, or the console does not answer, the rows stay
  // as they were, marked stale, under a sentence saying what failed.
  var overview = document.getElementById("overview");
  var banner = document.getElementById("overview-error");
  function showProblem(msg) {
    if (!banner) return;
    banner.textContent = msg;
    banner.hidden = false;
  }
  if (overview) {
    poll(overview.getAttribute("data-poll"), 2000, function (j) {
      if (j.error) {
        overview.classList.add("stale");
        showProblem(j.error + " (the rows below are from the last good refresh; " + clock() + ")");
        return;
      }
      overview.classList.remove("stale");
      if (banner) { banner.hidden = true; banner.textContent = ""; }
      var tbody = overview.tBodies[0];
      var rows = document.createDocumentFragment();
      j.queues.forEach(function (q) {
        var tr = document.createElement("tr");
        tr.setAttribute("data-queue", q.name);
        if (q.error) tr.className = "unknown";
        var td = document.createElement("td");
        td.className = "name";
        var a = document.createElement("a");
        a.href = base + "/q/" + encodeURIComponent(q.name);
        shown(a, q.nameParts, q.name);
        var badge = document.createElement("span");
        badge.className = "badge " + q.kind;
        badge.textContent = q.kind;
        td.appendChild(a);
        td.appendChild(document.createTextNode(" "));
        td.appendChild(badge);
        tr.appendChild(td);
        shown(cell(tr, "name", ""), q.sourceParts, q.source);
        cell(tr, "num depth", q.depth === null || q.depth === undefined ? "unknown" : String(q.depth));
        var oldest = cell(tr, "oldest", q.unread ? "not read (a read would change it; open the queue for why)" : (q.oldest || ""));
        if (q.unread) oldest.title = "not read: " + q.unread;
        cell(tr, "growth", q.growth || "");
        rows.appendChild(tr);
        if (q.error) {
          var er = document.createElement("tr");
          er.className = "row-error";
          cell(er, "error", q.error).colSpan = 5;
          rows.appendChild(er);
        }
      });
      if (j.queues.length === 0) {
        var tr = document.createElement("tr");
        tr.className = "empty";
        cell(tr, "", "No .dlq or .parked queues on this broker.").colSpan = 5;
        rows.appendChild(tr);
      }
      tbody.replaceChildren(rows);
      overview.setAttribute("data-refreshed", String(Date.now()));
    }, function (msg) {
      overview.classList.add("stale");
      showProblem("Cannot refresh: " + msg + " The rows below are from the last good refresh (" + clock() + ").");
    });
  }

  // A live depth on the queue and outcome pages.
  var depth = document.getElementById("depth");
  if (depth && depth.getAttribute("data-poll")) {
    var name = depth.getAttribute("data-queue");
    poll(depth.getAttribute("data-poll"), 2000, function (j) {
      j.queues.forEach(function (q) {
        if (q.name === name) depth.textContent = q.depth === null || q.depth === undefined ? "unknown" : String(q.depth);
      });
    }, function () { depth.textContent = depth.textContent.replace(/ \(stale\)$/, "") + " (stale)"; });
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

  // A one-time sign-in link: the code is in the fragment, which the
  // browser never sent. Drop it from the address, then post it once.
  var codeForm = document.getElementById("sign-in-code");
  if (codeForm) {
    var m = /^#code=([0-9a-f]+)$/.exec(location.hash);
    if (m) {
      history.replaceState(null, "", location.pathname);
      document.getElementById("code").value = m[1];
      codeForm.submit();
    }
  }

  // Select every row on the page.
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll('#messages input[name="id"]').forEach(function (b) { b.checked = all.checked; });
    });
  }
})();
